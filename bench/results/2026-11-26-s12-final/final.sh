#!/bin/bash
# Lead's final call, session 12 (2026-11-26): the merged tree (s12-attn decode PDL v2.16/v3.5,
# s12-gemv gemv.cu v8 / ops.cu v10 / v21c, s12-mb skinny.cu (off), s12-bw split_mma v2.10-v2.11,
# s12-dec's tests, GraphStats.LastDirect) on the H100: the GPU tests the merged changes touch, then
# the B = 1 step alternated with session 11's final tree (bitdecode-base, 5a0fc94) three times,
# max batch for both, the attention grid and the bw rows.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: binaries, gocoder-23m with
# heldout.txt's first 20000 bytes, T4/bitdecode.json: dec-7's tune dec settings).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp final.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-base *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=150
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kernels kernels.test '^(TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine|TestGridDependentKernelsWait|TestSkinnyMatchesReference|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVSwiGLU|TestGEMVRoPE|TestOpsAddRMSNorm|TestOpsRoPECols|TestDECFusedProtocol)$'
tst planesk kernels.test '^(TestGPUPlanesMatchesReference|TestGPUPlanesSplits|TestGPUPlanesSpecPlans)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestEarlyNormInputs|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestFoldHalfAndRoPEJoined|TestLinearGroup|TestLinearGraphReplay|TestBatchInvariantLinear|TestQuantLinearDEC)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUScheduler|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant|TestGPUSyntheticFamilies)$'
tst planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneScheduler|TestGPUPlaneCacheMatchesReference)$'
# The two binaries' kernels compiled into their caches beside the tests.
(timeout 120 ./bitdecode-base bench model --ctx 1k --kv fp16,int4,int2 --steps 4 --no-linears > $R/warm_base.log 2>&1) &
(timeout 120 ./bitdecode bench model --ctx 1k --kv fp16,int4,int2 --steps 4 --no-linears > $R/warm_new.log 2>&1) &
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
for i in 1 2 3; do
  run b1_base$i 60 bitdecode-base $B1
  run b1_new$i 60 bitdecode $B1
done
run max_new 110 bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears
run max_base 110 bitdecode-base bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears
run attn 80 bitdecode bench attn --device cuda --kv fp16,int2,k4v2,int4,int4:kt128 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,128x8192
run model_bw 40 bitdecode bench model --ctx 32k --kv fp16,bw:h100,bw:m100:w0:s0,bw:l100:w0:s0 --steps 32 --no-linears
t end; snap; rm -rf $R
