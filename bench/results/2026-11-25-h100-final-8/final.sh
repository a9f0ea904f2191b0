#!/bin/bash
# Lead's final call, session 6 (2026-11-25): merged main's GPU tests (every package the session
# touched), the B = 1 step table with the bw rows, max batch and serving. Run from the repo root
# with .gpu/ carried (bundle.tar.xz: the binaries, servebench, gocoder-23m).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode servebench *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
T=175
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant.*|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits|TestGPUPerLayerFormats|TestGPUScheduler|TestLiveBound)$'
tst gpukv_planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference|TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneScheduler)$'
tst backend backend.test "${BACKEND:-^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestQueuedUploads|TestAddRMSNorm|TestLinearGroup|TestBatchInvariantLinear|TestQuantLinearGroupDEC|TestQuantLinearDEC)$}"
tst kernels_decode kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kernels_long kernels.test "${KLONG:-^(TestGPUDecodeLong|TestOps.*|TestKVAppendRot|TestGPUDecodeRingMatchesPipeline|TestDECFusedProtocol)$}"
tst kernels_planes kernels.test '^(TestGPUPlanesMatchesReference|TestGPUPlanesSplits|TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$'
tst kernels_dec kernels.test '^TestGEMVQDECMatchesSerial$'
wait; t phaseA; snap
timeout 100 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
t model_b1; snap
timeout 60 ./bitdecode bench model --ctx 32k --kv bw:h100,bw:m100:w0:s0,bw:h20:m80 --steps 32 --no-linears --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
t model_bw; snap
timeout 90 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
t model_max; snap
C=64 P=3072 N=512 G=$G bash serve.sh; t serve; snap
