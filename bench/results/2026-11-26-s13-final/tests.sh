#!/bin/bash
# Session 13's final call 1: the merged tree's GPU tests (every change of the session: the GPU
# argmax, the RoPE+append fold, planes' dealt tiles, gemvq v3.2, decode_mma v2.18-v2.19 and the
# timeline, the HtoD/DtoD fix, session 12's untested host-side mends), then bench attn (session
# 12's final binary against the tree) and the int4/int3-weight B = 1 steps.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: WITH_MODEL=1 build.sh's).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp tests.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-base *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=170
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst kdec kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong|TestGPUDecodeTimelineSameBits|TestSplitWavesFill|TestMMAMinSplit|TestDecodeDependentLaunch|TestKVAppendRoPE|TestKVAppendRot|TestArgmaxRows|TestOpsHadamard|TestOpsRoPECols)$'
tst kmisc kernels.test '^(TestGEMVQMatchesReference|TestGPUPlanesDeal|TestGPUPlanesMatchesReference|TestGEMV.*|TestGPUPackMatchesGo)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestEnqueueOutHalf|TestEnqueueOutWith|TestFold.*|TestLinearGraphReplay|TestQuantLinear|TestModelQuantMatchesCPU|TestForwardGreedyTokens|TestArgmaxRows.*|TestPinnedDownload|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPURoPEAppendSameBits|TestGPUGreedyTokens|TestGPUBatchInvariantLogits|TestGPUSyntheticFamilies|TestGPUPlaneCacheGolden|TestGPUScheduler)$'
tst gpukv2 gpukv.test '^(TestGPUCacheMatchesReference|TestGPUPerLayerFormats|TestGPUPrefixBatched)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
A="bench attn --device cuda --kv int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,55x32768,128x8192"
run attn_base 120 bitdecode-base $A
run attn_new 120 bitdecode $A
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
run w_base 70 bitdecode-base $W
run w_new 70 bitdecode $W
t end; snap; rm -rf $R
