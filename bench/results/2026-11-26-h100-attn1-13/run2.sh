#!/bin/bash
# Session 19 call 2: tests of v2.18, then main (/work/main HEAD 97c35bf) against v2.18 alternated.
set -o pipefail
cd "$(dirname "$0")/.."
R=$PWD
W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-attn1/bins.tar.xz','r:xz').extractall('$W'); tarfile.open('.gpu-attn1/gocoder.tar.xz','r:xz').extractall('$W')"
echo "unpacked $(el)s" >> $OUT/times.txt
B=$W/bins
export BITDECODE_GOCODER_DIR=$W/gm
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
( cd gpu/kernels && timeout 85 $B/kernels.test -test.v -test.count=1 -test.run 'TestGPUDecodeMatchesReference/mma' > $OUT/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 85 $B/kernels.test -test.v -test.count=1 -test.run 'TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine|TestDecodeDependentLaunch|TestMMAMinSplit|TestGPUDecodeTimelineSameBits|TestSummarizeTimeline' > $OUT/t_kernels.log 2>&1; echo "t_kernels rc=$? $(el)s" >> $OUT/times.txt ) &
( cd kvcache/gpukv && timeout 85 $B/gpukv.test -test.v -test.count=1 -test.run 'TestGPUCacheGolden|TestGPUGraphReplaySameBits' > $OUT/t_gpukv.log 2>&1; echo "t_gpukv rc=$? $(el)s" >> $OUT/times.txt ) &
wait
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 240 - $(el) )) "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $OUT/times.txt; else echo "$n skipped at $(el)s" >> $OUT/times.txt; fi; }
A="bench attn --device cuda --kv int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,128x8192"
M="bench model --ctx 32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears"
BITDECODE_PTXAS_VERBOSE=1 step attn_main1 200 $B/bitdecode-main $A
BITDECODE_PTXAS_VERBOSE=1 step attn_new1 205 $B/bitdecode $A
step model_main1 205 $B/bitdecode-main $M
step model_new1 210 $B/bitdecode $M
step attn_main2 215 $B/bitdecode-main $A
step attn_new2 220 $B/bitdecode $A
step model_main2 222 $B/bitdecode-main $M
step model_new2 226 $B/bitdecode $M
