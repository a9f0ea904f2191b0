#!/bin/bash
# s12-mb call 2: skinny.cu v1/v2 tests, the backend's linear tests (default, and BITDECODE_SKINNY=on),
# bench gemv at 15/55/100 rows, then main's binary against this branch (BITDECODE_SKINNY=auto, and =on once):
# bench model --ctx 32k --kv fp16,int4,int2 --batch max (alternated twice) and --batch 16.
set -o pipefail
S0=$(date +%s)
cd .gpu-mb; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "$(date -u +%T) $(( $(date +%s) - S0 ))s $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name env binary regexp
  (env $2 timeout 70 ./$3 -test.v -test.timeout 70s -test.run "$4" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels X=1 kernels.test '^(TestSkinnyMatchesReference|TestSkinnySplitAndRefusals|TestGridDependentKernelsWait|TestLinearMatchesReference|TestLinearBatchInvariant|TestLinearGroups)$'
tst backend X=1 gpu.test '^(TestLinearGraphReplay|TestLinearGroup|TestBatchInvariantLinear|TestFP16PathByShape|TestJoinWeights|TestFoldSwiGLUJoined|TestFoldHalfAndRoPEJoined|TestEnqueueOutHalf|TestParseOptions|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst backend_on BITDECODE_SKINNY=on gpu.test '^(TestLinearGroup|TestJoinWeights|TestFoldSwiGLUJoined|TestFoldHalfAndRoPEJoined|TestEnqueueOutHalf|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv X=1 gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$'
wait; t tests; snap
timeout 45 ./bitdecode bench gemv --rows 15,55,100 --json $R/gemv.json > $R/gemv.log 2>&1; echo "rc=$?" >> $R/gemv.log; t gemv; snap
run() { # name env binary args...
  local n=$1 e=$2 b=$3; shift 3
  if [ $(( $(date +%s) - S0 )) -gt 170 ]; then t "skipped $n"; return; fi
  env $e timeout 40 ./$b bench model "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
MAX="--ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
B16="--ctx 32k --kv fp16,int4,int2 --batch 16 --steps 16 --no-linears"
run max_main_1 X=1 bitdecode-main $MAX
run max_auto_1 BITDECODE_SKINNY=auto bitdecode $MAX
run max_main_2 X=1 bitdecode-main $MAX
run max_auto_2 BITDECODE_SKINNY=auto bitdecode $MAX
run max_on_1 BITDECODE_SKINNY=on bitdecode $MAX
run b16_main_1 X=1 bitdecode-main $B16
run b16_auto_1 BITDECODE_SKINNY=auto bitdecode $B16
t end; snap; rm -rf $R
