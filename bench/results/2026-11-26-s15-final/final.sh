#!/bin/bash
# Session 15's final calls. TESTS=1 (the default) runs the merged tree's GPU tests (every test a
# kernel or backend change of sessions 14-15 touches, 15 processes in parallel under $TESTS_S each);
# WAB=1 the packed-weight step, session 14's final binary (bitdecode-base, 31acbd1) against the merged
# tree, alternated, and the merged tree with v6 (BITDECODE_GEMVQ_V51) and wq's layout
# (BITDECODE_GEMVQ_WQ); TABLE=1 the step table, max batch, packed weights and the attention grid
# (issue #19 item 4, run on the H200).
# Run from the repo root with .gpu/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp final.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test 2>/dev/null
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=${TESTS_S:-170}
if [ "${TESTS:-1}" = 1 ]; then
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kdec kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeTimelineSameBits|TestSplitWavesFill|TestMMAMinSplit|TestDecodeDependentLaunch|TestKVAppendRoPE|TestKVAppendRot|TestArgmaxRows|TestOpsHadamard|TestOpsRoPECols|TestOpsAddRMSNorm)$'
tst kgemvq kernels.test "^(TestGEMVQMatchesReference|TestGEMVQ52MatchesV51|TestGEMVQ3SplitFor|TestGEMVQ4SplitFor|TestGEMVQ5SplitFor|TestPackTilesMatchesWQ|TestGEMVQ6MatchesV5|TestGEMVQTiledMatchesWQ)\$"
tst kgemv kernels.test "^(TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVMatchesReference|TestGEMVDependentLaunch|TestGEMVGroups|TestGEMVDepths|TestGEMVSplitTiers|TestGEMVEarlyKinds${GEMV_EXTRA})\$"
tst kplanes1 kernels.test '^(TestGPUPlanesMatchesReference)$'
tst kplanes2 kernels.test '^(TestGPUPlanesSplits|TestGPUPlanesSpecPlans|TestGPUPlanesDeal|TestGPUPlanesTimelineSameBits|TestGPUPlanesFilter|TestGPUPackMatchesGo)$'
DG='^TestGEMVQDECMatchesSerial$/'
tst dec3 kernels.test "${DG}^int4-resint4-N[0-9]+-K[0-9]+-T1-k[0-9]{1,2}-"
tst dec2 kernels.test "${DG}^int4-resint4-N[0-9]+-K[0-9]+-(T[2-8]|T1-k128)-"
tst dec_int3 kernels.test "${DG}^int3-"
tst dec_serial kernels.test '^(TestDECSelectMatchesWQ|TestDECCompensateMatchesWQ|TestDECFullMatchesExact|TestDECFusedProtocol|TestDECFusedLateWords)$'
tst bdec backend.test '^(TestQuantLinearGroupDEC|TestQuantLinearDEC|TestModelDECMatchesCPU)$'
tst backend backend.test "^(TestModelMatchesCPU|TestModelPDLSameBits|TestEnqueueOutHalf|TestEnqueueOutWith|TestFold.*|TestLinearGraphReplay|TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestModelQuantMatchesCPU|TestForwardGreedyTokens|TestArgmaxRows.*|TestPinnedDownload|TestBatchInvariantLinear${BACKEND_EXTRA})\$"
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPURoPEAppendSameBits|TestGPUGreedyTokens|TestGPUBatchInvariantLogits|TestGPUSyntheticFamilies|TestGPUPlaneCacheGolden|TestGPUScheduler)$'
tst gpukv2 gpukv.test '^(TestGPUCacheMatchesReference|TestGPUPerLayerFormats|TestGPUPrefixBatched|TestGPUPlaneCacheMatchesReference)$'
wait; t tests; snap
fi
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
export BITDECODE_CACHE_DIR=$G/cache
B1="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32 --no-linears"
MX="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
W4="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
W8="bench model --ctx 1k --kv int4 --weights int4 --batch 8 --steps 32 --no-linears"
AT="bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,128x8192"
if [ "${WAB:-0}" = 1 ]; then # the packed-weight step: session 14's final binary against the merged tree
  for i in 1 2; do
    run w4_base_$i 50 bitdecode-base $W4
    run w4_new_$i 50 bitdecode $W4
  done
  run w8_base 50 bitdecode-base $W8
  run w8_new 50 bitdecode $W8
  BITDECODE_GEMVQ_V51=1 run w4_v51 50 bitdecode $W4
  BITDECODE_GEMVQ_WQ=1 run w4_wq 50 bitdecode $W4
fi
if [ "${TABLE:-0}" = 1 ]; then # issue #19 item 4: the step table, max batch, packed weights, the grid
  run b1_new 150 bitdecode $B1
  run max_new 100 bitdecode $MX
  run w_new 50 bitdecode $W
  run b1_new2 80 bitdecode $B1
  run attn_new 200 bitdecode $AT
fi
if [ "${PLANES_LEFT:-0}" = 1 ]; then # the two planes tests call 1's kplanes2 did not reach, after the table (not beside it: the GPU's timings)
  (timeout ${PLANES_S:-160} ./kernels.test -test.v -test.timeout ${PLANES_S:-160}s -test.run '^(TestGPUPlanesTimelineSameBits|TestGPUPlanesFilter)$' > $R/kplanes3.log 2>&1; echo "rc=$?" >> $R/kplanes3.log)
fi
t end; snap; rm -rf $R
