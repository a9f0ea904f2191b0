#!/bin/bash
# s12-mb call 1: skinny.cu's tests, bench gemv at 15/55/100 rows (cuBLASLt vs skinny.cu),
# bench attn at 55x32K and 100x32K, and the int4 max-batch step of this branch once.
set -o pipefail
cd .gpu-mb; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
timeout 60 ./kernels.test -test.v -test.timeout 60s -test.run '^(TestSkinnyMatchesReference|TestSkinnySplitAndRefusals|TestLinearMatchesReference)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log; t kernels; snap
timeout 60 ./bitdecode bench gemv --rows 15,32,55,100,128 --json $R/gemv.json > $R/gemv.log 2>&1; echo "rc=$?" >> $R/gemv.log; t gemv; snap
timeout 30 ./bitdecode bench attn --device cuda --kv int4,int4:kt128,int2 --grid 55x32768,100x32768 --json $R/attn.json > $R/attn.log 2>&1; echo "rc=$?" >> $R/attn.log; t attn; snap
timeout 40 ./gpu.test -test.v -test.timeout 40s -test.run '^(TestJoinWeights|TestLinearGraphReplay|TestLinearGroup|TestFP16PathByShape|TestBatchInvariantLinear|TestFoldSwiGLUJoined|TestFoldHalfAndRoPEJoined)$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log; t backend; snap
timeout 45 ./bitdecode bench model --ctx 32k --kv int4 --batch max --steps 16 --no-linears --json $R/model_int4.json > $R/model_int4.log 2>&1; echo "rc=$?" >> $R/model_int4.log; t model_int4; snap
rm -rf $R
