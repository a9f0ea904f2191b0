#!/bin/bash
# Lead's fourth call, session 12: the tree after the second round (s12-b1s decode_mma v2.17 and the
# one fused merge, finishSplits; s12-mbops v22: the logits through pinned memory, the rotated
# output's fp16 copy) against call 3's bitdecode (bitdecode-prev2: the one-wave rule, neither of
# those): the GPU tests they touch, including the model and cache tests on gocoder-23m, then
# attention, the B = 1 step and max batch alternated.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: build2.sh's).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp final2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-prev2 *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=150
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst kernels kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong|TestGPUPlanesSplits|TestGPUPlanesMatchesReference|TestOpsHadamard|TestKVAppendRot|TestGPUPackMatchesGo)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestPinnedDownload|TestEnqueueOutWith|TestEnqueueOutHalf|TestLinearGraphReplay|TestBatchInvariantLinear|TestLinearGroup)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUPlaneCacheGolden|TestGPUSyntheticFamilies)$'
(timeout 120 ./bitdecode-prev2 bench model --ctx 1k --kv fp16,int4,int2 --steps 4 --no-linears > $R/warm_prev2.log 2>&1) &
(timeout 120 ./bitdecode bench model --ctx 1k --kv fp16,int4,int2 --steps 4 --no-linears > $R/warm_new.log 2>&1) &
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
A="bench attn --device cuda --kv fp16,int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192"
run attn_prev2 70 bitdecode-prev2 $A
run attn_new 70 bitdecode $A
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
MX="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
for i in 1 2; do
  run b1_prev2$i 40 bitdecode-prev2 $B1
  run b1_new$i 40 bitdecode $B1
  run max_prev2$i 40 bitdecode-prev2 $MX
  run max_new$i 40 bitdecode $MX
done
t end; snap; rm -rf $R
