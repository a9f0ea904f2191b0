#!/bin/bash
# session 25 lead: ops.cu's GLU list kernels after the review mend (selectRowChunk shared by swiglu_cols_sel and swiglu_sel).
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
(cd $ROOT/gpu/kernels && timeout 200 $D/kernels.test -test.v -test.timeout 195s -test.run '^(TestOpsGLUColsSel|TestOpsGLUSel|TestOpsAddRMSNormSel|TestOpsOutSel)$' > $R/kern.log 2>&1; echo "rc=$?" >> $R/kern.log) &
(cd $ROOT/backend/gpu && timeout 200 $D/gpu.test -test.v -test.timeout 195s -test.run '^(TestQ6DECDownSelect|TestQ6DECNormSelect|TestQ6DECOutSelect)$' > $R/back.log 2>&1; echo "rc=$?" >> $R/back.log) &
wait
tar czf $OUT/results.tgz -C /tmp r; grep -hE "^(--- |ok|PASS|FAIL|rc=)" $R/kern.log $R/back.log
