#!/bin/bash
# Session 21 call 1: tests of v2.20, then main (/work/main HEAD 9d3f0e4) against v2.20 alternated.
set -o pipefail
cd "$(dirname "$0")/.."
W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-b1attn/bins.tar.xz','r:xz').extractall('$W')"
echo "unpacked $(el)s" >> $OUT/times.txt
B=$W/bins
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
( cd gpu/kernels && timeout 40 $B/kernels.test -test.v -test.count=1 -test.run 'TestGPUDecodeMatchesReference/mma' > $OUT/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 40 $B/kernels.test -test.v -test.count=1 -test.run 'TestGPUDecodeTilesFirstSameBits|TestGPUDecodeOneSplitMatchesCombine' > $OUT/t_bits.log 2>&1; echo "t_bits rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 40 $B/kernels.test -test.v -test.count=1 -test.run 'TestGPUDecodeLong|TestDecodeDependentLaunch|TestMMAMinSplit|TestSplitWavesFill|TestGPUDecodeTimelineSameBits|TestParseTuning' > $OUT/t_misc.log 2>&1; echo "t_misc rc=$? $(el)s" >> $OUT/times.txt ) &
wait
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 135 - $(el) )) "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $OUT/times.txt; else echo "$n skipped at $(el)s" >> $OUT/times.txt; fi; }
A="bench attn --device cuda --kv int4,int2 --grid 1x8192,1x32768,1x131072"
M="bench model --ctx 32k,128k --kv int4,int2 --batch 1 --steps 32 --no-linears"
step attn_main1 110 $B/bitdecode-main $A
step attn_new1 115 $B/bitdecode $A
step model_main1 118 $B/bitdecode-main $M
step model_new1 122 $B/bitdecode $M
BITDECODE_DECODE_TILES_FIRST=1 step attn_tf1 125 $B/bitdecode $A
BITDECODE_DECODE_SPLITS=target:512 step attn_s512 127 $B/bitdecode bench attn --device cuda --kv int4,int2 --grid 1x131072
step attn_main1b 128 $B/bitdecode-main bench attn --device cuda --kv int4:kt128,k4v2 --grid 1x8192,1x32768,1x131072
step attn_new1b 129 $B/bitdecode bench attn --device cuda --kv int4:kt128,k4v2 --grid 1x8192,1x32768,1x131072
cd $OUT && tar czf results.tgz *.md *.log *.txt && rm -f *.md *.log
