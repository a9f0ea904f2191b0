#!/bin/bash
# sanity.sh (session 11, after the final call): the GPU tests of the merge and RoPE refactors
# (8f85978, dc86dd1), which the NVRTC 11.8 PTX comparisons cover only in part.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R; cp sanity.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x *.test; export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
tst() { (timeout 150 ./$2 -test.v -test.timeout 150s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst ops kernels.test '^(TestOpsRoPE|TestOpsRoPEQK|TestOpsRoPECols|TestGEMVRoPE|TestGEMVMatchesReference)$'
tst onesplit kernels.test '^TestGPUDecodeOneSplitMatchesCombine$'
tst planes kernels.test '^TestGPUPlanesMatchesReference$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestFoldHalfAndRoPEJoined|TestFoldRoPE)$'
wait; (cd $OUT && tar czf results.tgz r)
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/*.log
