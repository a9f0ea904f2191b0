#!/bin/bash
# s13-b1small call 1 (2026-11-26): gemv.cu v9's tail kernel (o and down at T <= 2 reading fp16 x and
# ending with the residual add and RMSNorm), both folds on by default. The GPU tests, then bench model
# B = 1 (1K, 32K, 128K; fp16, int4, int2) with the default and each fold off alternated (both off =
# main's ops), then max batch at 32K once.
set -o pipefail
T0=$(date +%s)
cd .gpu-b1small; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../run1.sh $R/
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=70
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kernels kernels.test '^(TestGEMVTail|TestGEMVTailShapes|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVDependentLaunch|TestGEMVSwiGLU|TestGEMVRoPE|TestGridDependentKernelsWait|TestOpsAddRMSNorm|TestOpsConvert)$'
tst backend backend.test '^(TestFoldGEMVTail|TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestLinearGroup|TestFoldSwiGLU|TestFoldRoPE|TestEnqueueOutHalf|TestEnqueueOutWith|TestFoldHalfAndRoPEJoined|TestEarlyNormInputs|TestEarlyNormInputsDecision|TestParseOptions|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits)$'
wait; t tests; snap
run() { # name args, env...
  local v=$1 a=$2; shift 2
  env "$@" timeout 40 ./bitdecode bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"; snap
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2 3; do
  [ $(el) -gt 150 ] && break
  run def_$i "$FULL" X=0
  run off_$i "$FULL" BITDECODE_NO_GEMV_NORM=1 BITDECODE_NO_GEMV_HALF_X=1
  [ $i = 3 ] && break
  run nonorm_$i "$FULL" BITDECODE_NO_GEMV_NORM=1
  run nohalf_$i "$FULL" BITDECODE_NO_GEMV_HALF_X=1
done
[ $(el) -lt 160 ] && run max_def "--batch max --ctx 32k --kv fp16,int4,int2 --steps 16" X=0
t end; snap
grep -H "ms/step\|rc=" $R/b_*.log | sed 's|.*/b_||' | grep -v weights | head -120
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log | head -60
cat $R/times.txt
