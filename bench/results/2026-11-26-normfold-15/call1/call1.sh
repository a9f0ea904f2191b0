#!/bin/bash
# s15-normfold call 1 (2026-11-26): gemv.cu v10, the RMSNorm folded into the GEMVs around it at one row
# (BITDECODE_GEMV_NORMFOLD). The GPU tests (fold on; the model tests also off), then bench model B = 1
# (1K, 32K, 128K; fp16, int4, int2): main's binary, this branch with the fold off, on, alternated twice;
# then ncu of the fp16 1K step with the fold on and off, if time is left.
set -o pipefail
T0=$(date +%s)
cd .gpu-normfold; R=/tmp/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ../call1.sh $R/
chmod +x bitdecode bitdecode-base *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd /tmp && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=150
tst() { local n=$1 b=$2 re=$3; shift 3; (env "$@" timeout $T ./$b -test.v -test.timeout ${T}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log) & }
tst kernels kernels.test '^(TestGEMVNorm|TestGEMVAddNorm|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVDependentLaunch|TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVEarlyKinds|TestGridDependentKernelsWait|TestOpsAddRMSNorm)$' X=0
tst backend backend.test '^(TestNormFoldDecision|TestFoldNorm|TestModelMatchesCPU|TestModelPDLSameBits|TestForwardGreedyTokens|TestLinearGraphReplay|TestLinearGroup.*|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestEarlyNormInputs|TestEarlyNormInputsDecision|TestParseOptions|TestBatchInvariantLinear)$' BITDECODE_GEMV_NORMFOLD=1
tst backend0 backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestFoldNorm)$' BITDECODE_GEMV_NORMFOLD=0
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUGreedyTokens)$' BITDECODE_GEMV_NORMFOLD=1
# main's gemv.cu into the kernel cache while the tests run (not timed)
(timeout $T ./bitdecode-base bench model --batch 1 --ctx 1k --kv fp16 --steps 2 --no-linears > $R/warm_base.log 2>&1; echo "rc=$?" >> $R/warm_base.log) &
wait; t tests; snap
run() { # name binary args, env...
  local v=$1 bin=$2 a=$3; shift 3
  env "$@" timeout 60 ./$bin bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"; snap
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2; do
  run main_$i bitdecode-base "$FULL" X=0
  run off_$i bitdecode "$FULL" BITDECODE_GEMV_NORMFOLD=0
  run on_$i bitdecode "$FULL" BITDECODE_GEMV_NORMFOLD=1
done
nc() { # name timeout env...
  local v=$1 to=$2; shift 2
  env "$@" timeout $to ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx 1k --kv fp16 --batch 1 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
  t ncu_$v; snap
}
[ $(el) -lt 220 ] && nc on 30 BITDECODE_GEMV_NORMFOLD=1
[ $(el) -lt 250 ] && nc off 30 BITDECODE_GEMV_NORMFOLD=0
t end; snap
grep -H "read ceiling" $R/b_main_1.log
grep -H "ms/step\|rc=" $R/b_*.log | sed 's|.*/b_||' | grep -v weights | sed 's/ (.*tok\/s)//' | head -70
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/kernels.log $R/backend.log $R/backend0.log $R/gpukv.log | head -70
grep -h "^## step\|gemv\|add_rms\|rc=" $R/ncu_*.step.txt $R/ncu_*.err 2>/dev/null | head -30
cat $R/times.txt
