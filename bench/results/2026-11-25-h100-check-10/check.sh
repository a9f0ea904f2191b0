#!/bin/bash
# finishSplits shared by decode_mma, decode_wgmma and planes' split_mma (finishPlanes folded in): the touched kernels' tests.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R; chmod +x *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt; date -u >> $R/gpu.txt
T=150
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst decode_mma kernels.test '^TestGPUDecodeMatchesReference$/^mma$'
tst decode_wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst long kernels.test '^(TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline)$'
tst planes kernels.test '^(TestGPUPlanesMatchesReference|TestGPUPlanesSplits|TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16)$'
tst gpukv gpukv.test '^(TestGPUPlaneCacheMatchesReference|TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy|TestGPUCacheMatchesReference)$'
wait; date -u >> $R/gpu.txt; snap
