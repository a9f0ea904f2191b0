#!/bin/bash
# Lead's final call, session 11 (2026-11-26): the merged tree (s11-step v19, s11-epi decode_mma
# v2.15, s11-b1a decode_wgmma v3.3-v3.4, s11-b1g gemv.cu v7 (rings only from LoadGEMVRings), s11-bw split_mma v2.9, s11-dec DEC v7, bench
# model's collection between weight rows) on the H100: the tests that read gocoder-23m and the
# ones the helpers' calls did not run, then the B = 1 step table, max batch, the attention grid,
# the bw rows and DEC's step in one process with a k 64 row before tuned:5%.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: binaries, gocoder-23m with
# heldout.txt's first 20000 bytes (all TestGPUPlaneCacheGolden reads), T4/bitdecode.json: dec-7's tune dec settings).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp final.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=120
tst() { # name binary regexp [extra flags]
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" $4 > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kernels kernels.test '^(TestDECFusedLateWords|TestDECFusedProtocol|TestGPUDecodeOneSplitMatchesCombine|TestOpsRoPECols|TestGPUDecodeLong|TestGPUPlanesSpecPlans|TestGEMVDepths|TestGEMVRoPE|TestGEMVMatchesReference)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestFreeWeightAfterQueuedLinear|TestFoldHalfAndRoPEJoined|TestEnqueueOutHalf|TestLinearGraphReplay|TestBatchInvariantLinear|TestQuantLinearDEC)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUScheduler|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant)$'
tst planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneScheduler|TestGPUPlaneCacheMatchesReference)$'
wait; t tests; snap
run() { # name seconds args...
  local n=$1 s=$2; shift 2
  timeout $s ./bitdecode "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run model_b1 70 bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 48 --no-linears
run model_max 100 bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears
run attn 80 bench attn --device cuda --kv fp16,int2,k4v2,int4,int4:kt128 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,128x8192
run model_bw 40 bench model --ctx 32k --kv bw:h100,bw:m100:w0:s0,bw:l100:w0:s0 --steps 32 --no-linears
run model_dec 90 bench model --ctx 1k --kv int4 --weights int4 --no-linears --steps 16 --dec-k 0,64,0,tuned:5%,0,tuned:5% --dec-settings T4
t end; snap; rm -rf $R
