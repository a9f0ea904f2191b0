#!/bin/bash
# Session 22 call 1: the GPU tests of v2.22 (the L2 prefetch on: BITDECODE_DECODE_L2AHEAD=3), then
# bench attn with the prefetch off (the default) and on, one process each, the same binary, alternated.
set -o pipefail
cd "$(dirname "$0")/.."
W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-b8k/bins.tar.xz','r:xz').extractall('$W')"
echo "unpacked $(el)s" >> $OUT/times.txt
B=$W/bins
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=$W/cache
T() { local n=$1; shift; ( cd gpu/kernels && BITDECODE_DECODE_L2AHEAD=3 timeout 50 $B/kernels.test -test.v -test.count=1 -test.run "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? $(el)s" >> $OUT/times.txt ) & }
T t_same 'TestGPUDecodeL2AheadSameBits|TestMMAL2Ahead|TestParseTuning|TestDecodeDependentLaunch'
T t_ref 'TestGPUDecodeMatchesReference/mma'
T t_one 'TestGPUDecodeOneSplitMatchesCombine'
T t_long 'TestGPUDecodeLong'
wait
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone, cut at 150 s
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 150 - $(el) )) "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $OUT/times.txt; else echo "$n skipped at $(el)s" >> $OUT/times.txt; fi; }
A="bench attn --device cuda --kv int4,int4:kt128,int2,k4v2"
G="--grid 1x8192,1x32768,1x131072"
BITDECODE_DECODE_L2AHEAD=0 step off1 100 $B/bitdecode $A $G
BITDECODE_DECODE_L2AHEAD=3 step on1 115 $B/bitdecode $A $G
BITDECODE_DECODE_L2AHEAD=0 step off2 125 $B/bitdecode $A --grid 1x8192
BITDECODE_DECODE_L2AHEAD=3 step on2 130 $B/bitdecode $A --grid 1x8192
BITDECODE_DECODE_L2AHEAD=0 step off3 135 $B/bitdecode $A --grid 1x8192
BITDECODE_DECODE_L2AHEAD=3 step on3 140 $B/bitdecode $A --grid 1x8192
step main1 142 $B/bitdecode-main $A --grid 1x8192
cd $OUT && tar czf results.tgz *.md *.log *.txt && rm -f *.md *.log
