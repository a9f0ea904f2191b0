#!/bin/bash
# Lead's final call, session 9 (2026-11-25): merged main's GPU tests (every package the session
# touched: the gemv SwiGLU/RoPE folds, DEC v6's one-trip protocol, planes retier_v3 and the v2.6
# split rule), the B = 1 step table with the bw rows, max batch; on an H200 also the attention grid.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: binaries and gocoder-23m).
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
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
T=170
tst() { # name binary regexp [extra flags]
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" $4 > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
D='^TestGEMVQDECMatchesSerial$/'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant.*|TestGPUGraphReplaySameBits|TestGPUPerLayerFormats|TestGPUScheduler|TestLiveBound)$'
tst gpukv_planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference|TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneScheduler|TestNearTieSwap)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestQueuedUploads|TestAddRMSNorm|TestLinearGroup|TestBatchInvariantLinear|TestQuantLinearGroupDEC|TestQuantLinearDEC|TestFoldSwiGLU|TestFoldRoPE|TestRoPEQK|TestElementwise|TestLinearGraphReplay)$'
tst kernels_decode kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kernels_long kernels.test '^(TestGPUDecodeLong|TestOps.*|TestKVAppendRot|TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVGroups|TestGEMVMatchesReference|TestGEMVDependentLaunch)$'
tst kernels_planes kernels.test '^(TestGPUPlanesMatchesReference|TestGPUPlanesSplits|TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$'
tst kernels_dec_n4096 kernels.test "${D}-N4096-" -test.count=5
tst kernels_dec_rest kernels.test "${D}-N(14336|1024|256|384)-" -test.count=2
tst kernels_dec_protocol kernels.test '^TestDECFusedProtocol$' -test.count=3
wait; t phaseA; snap
timeout 110 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
t model_b1; snap
timeout 60 ./bitdecode bench model --ctx 32k --kv bw:h100,bw:m100:w0:s0,bw:h20:m80 --steps 32 --no-linears --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
t model_bw; snap
timeout 90 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
t model_max; snap
case "$GPU" in *H200*)
  timeout 150 ./bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,128x8192 --json $R/attn.json > $R/attn.md 2> $R/attn.err; echo "rc=$?" >> $R/attn.err
  t attn; snap;;
esac
t end; snap; rm -rf $R
