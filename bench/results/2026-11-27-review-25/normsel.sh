#!/bin/bash
# session 25 lead: gpu/kernels' DEC list tests after the review mend (normsel_test.go's shared helpers).
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
cd gpu/kernels && timeout 240 $D/kernels.test -test.v -test.timeout 235s -test.run '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel|TestOpsGLUSel)$' > $R/kern.log 2>&1; echo "rc=$?" >> $R/kern.log
tar czf $OUT/results.tgz -C /tmp r; grep -E "^(--- |=== RUN|ok|PASS|FAIL|rc=)" $R/kern.log | grep -v "=== RUN" | tail -12
