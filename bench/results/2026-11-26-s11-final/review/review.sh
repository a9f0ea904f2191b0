#!/bin/bash
# review.sh (session 11, after the review's mends 0b7bd3f, d6ff001 and lastArrival): the GPU tests
# of the shared RoPE rotation and bias add, the joined GEMM's folds and the fused merge's count.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R; cp review.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x *.test; export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
tst() { (timeout 170 ./$2 -test.v -test.timeout 170s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst ops kernels.test '^(TestOpsRoPE|TestOpsRoPEQK|TestOpsRoPECols|TestOpsSplitCols|TestOpsElementwise|TestGEMVRoPE|TestGEMVMatchesReference)$'
tst wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst onesplit kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUPlanesSplits)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestFoldSwiGLUJoined|TestFoldHalfAndRoPEJoined|TestFoldRoPE|TestFoldSwiGLU|TestEnqueueOutHalf|TestLinearGraphReplay)$'
tst gpukv gpukv.test '^(TestGPUSyntheticFamilies|TestGPUCacheGolden|TestGPUGraphReplaySameBits)$'
wait; (cd $OUT && tar czf results.tgz r)
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/*.log
