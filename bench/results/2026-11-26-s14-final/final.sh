#!/bin/bash
# Session 14's final call: the merged tree's GPU tests (every kernel change of the session: decode_mma
# v2.21's int2 loop, gemvq4.cu v5.1, gemv_q3_dec, split_mma v2.13+, and session 13's mends that never
# ran on a GPU), then the merged tree against session 13's final binary (bitdecode-base, 9d3f0e4),
# alternated: B = 1, max batch at 32K, packed weights, the attention grid and DEC's step rows.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: WITH_MODEL=1 build.sh's).
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
T=${TESTS_S:-170}
if [ "${PART:-all}" != bench ]; then
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kdec kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeTimelineSameBits|TestSplitWavesFill|TestMMAMinSplit|TestDecodeDependentLaunch|TestKVAppendRoPE|TestKVAppendRot|TestArgmaxRows|TestOpsHadamard|TestOpsRoPECols)$'
tst kgemv kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ3SplitFor|TestGEMVQ4SplitFor|TestGEMVQ5SplitFor|TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVMatchesReference|TestGEMVDependentLaunch|TestGEMVGroups|TestGEMVDepths|TestGEMVSplitTiers|TestGEMVEarlyKinds)$'
tst kplanes kernels.test "^(TestGPUPlanesMatchesReference|TestGPUPlanesSplits|TestGPUPlanesSpecPlans|TestGPUPlanesDeal|TestGPUPlanesTimelineSameBits|TestGPUPlanesFilter|TestGPUPackMatchesGo${PLANES_EXTRA})\$"
DG='^TestGEMVQDECMatchesSerial$/'
tst dec3 kernels.test "${DG}^int4-resint4-N[0-9]+-K[0-9]+-T1-k[0-9]{1,2}-"
tst dec2 kernels.test "${DG}^int4-resint4-N[0-9]+-K[0-9]+-(T[2-8]|T1-k128)-"
tst dec_int3 kernels.test "${DG}^int3-"
tst dec_serial kernels.test '^(TestDECSelectMatchesWQ|TestDECCompensateMatchesWQ|TestDECFullMatchesExact|TestDECFusedProtocol|TestDECFusedLateWords)$'
tst bdec backend.test '^(TestQuantLinearGroupDEC|TestQuantLinearDEC|TestModelDECMatchesCPU)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestEnqueueOutHalf|TestEnqueueOutWith|TestFold.*|TestLinearGraphReplay|TestQuantLinear|TestModelQuantMatchesCPU|TestForwardGreedyTokens|TestArgmaxRows.*|TestPinnedDownload|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPURoPEAppendSameBits|TestGPUGreedyTokens|TestGPUBatchInvariantLogits|TestGPUSyntheticFamilies|TestGPUPlaneCacheGolden|TestGPUScheduler)$'
tst gpukv2 gpukv.test '^(TestGPUCacheMatchesReference|TestGPUPerLayerFormats|TestGPUPrefixBatched|TestGPUPlaneCacheMatchesReference)$'
wait; t tests; snap
fi
[ "${PART:-all}" = tests ] && { t end; snap; rm -rf $R; exit 0; }
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
export BITDECODE_CACHE_DIR=$G/cache
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
MX="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
run b1_base 50 bitdecode-base $B1
run b1_new 50 bitdecode $B1
run max_base 50 bitdecode-base $MX
run max_new 50 bitdecode $MX
run w_base 50 bitdecode-base $W
run w_new 50 bitdecode $W
run max_new2 50 bitdecode $MX
run attn_new 120 bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,55x32768,128x8192
t end; snap; rm -rf $R
