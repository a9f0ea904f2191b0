#!/bin/bash
# Session 14's final call 2: the merged tree (bitdecode) against session 13's final binary
# (bitdecode-base, 9d3f0e4), then s14-b8k's L2 prefetch at one sequence (bitdecode-b8k, knob off / on)
# and the planes tests the first call's limit cut. In priority order: a cut call keeps what ran.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: build.sh's, with BENCH=1's extra binaries).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp bench.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
export BITDECODE_CACHE_DIR=$G/cache
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
MX="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
run b1_base 45 bitdecode-base $B1
run b1_new 45 bitdecode $B1
run max_base 45 bitdecode-base $MX
run max_new 45 bitdecode $MX
run w_new 30 bitdecode bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears
run attn_new 60 bitdecode bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x131072,55x32768,128x8192
A8="bench attn --device cuda --kv int4,k4v2 --grid 1x8192,1x32768"
export BITDECODE_DECODE_L2AHEAD=0; run b8k_off 30 bitdecode-b8k $A8
export BITDECODE_DECODE_L2AHEAD=3; run b8k_on 30 bitdecode-b8k $A8
unset BITDECODE_DECODE_L2AHEAD
( timeout 40 ./kernels-b8k.test -test.v -test.timeout 40s -test.run '^TestGPUDecodeL2AheadSameBits$' > $R/t_b8k.log 2>&1; echo "rc=$?" >> $R/t_b8k.log ) &
( timeout 60 ./kernels.test -test.v -test.short -test.timeout 60s -test.run '^(TestGPUPlanesSpecPlans|TestGPUPlanesDeal|TestGPUPlanesTimelineSameBits|TestGPUPlanesFilter)$' > $R/t_planes.log 2>&1; echo "rc=$?" >> $R/t_planes.log ) &
wait; t tests; t end; snap; rm -rf $R
