#!/bin/bash
# Session 21 (bilin), call 1: tests of linear.cu v5 (pair kernels, early weights) and the backend's
# folds; the batch-invariant (BI) step at B = 1 against the fast path, by kernel (ncu) and by wall
# (bench model), base (main 5c86472) and new (s21-bilin 7a3e5b6) alternated, new's knobs; bench gemv T = 1.
set -o pipefail
cd .gpu-bilin; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
T0=$(date +%s)
t() { echo "$(date -u +%T) $(( $(date +%s) - T0 ))s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv $G/backend/gpu $G/gpu/kernels
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 175 tk kernels.test '^(TestLinear.*|TestGridDependentKernelsWait|TestRoPE.*|TestSwiGLU)$' gpu/kernels
tst 175 tb gpu.test '^(TestFoldSwiGLU|TestFoldRoPE|TestEarlyNormInputs|TestEarlyNormInputsDecision|TestLinearQueuedOps|TestLinear|TestLinearGroup|TestLinearDeterministic|TestBatchInvariantLinear|TestLinearGraphReplay)$' backend/gpu
tst 175 tg gpukv.test '^(TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant|TestGPUGraphReplaySameBits)$' kvcache/gpukv
W="--ctx 8k --kv int4 --no-linears --steps 2 --cache-len 128k --batch 1"
( BITDECODE_BATCH_INVARIANT=1 timeout 120 ./bitdecode.base bench model $W > $R/warm_bbi.log 2>&1; t warm_bbi
  BITDECODE_BATCH_INVARIANT=1 timeout 60 ./bitdecode bench model $W > $R/warm_nbi.log 2>&1; t warm_nbi
  timeout 60 ./bitdecode.base bench model $W > $R/warm_bf.log 2>&1; t warm_bf
  for v in bbi bf nbi nbip; do
    case $v in bbi) B=./bitdecode.base; E=BITDECODE_BATCH_INVARIANT=1;; bf) B=./bitdecode.base; E=X=0;;
      nbi) B=./bitdecode; E=BITDECODE_BATCH_INVARIANT=1;; nbip) B=./bitdecode; E="BITDECODE_BATCH_INVARIANT=1 BITDECODE_LINEAR_PERSISTENT=1";; esac
    env $E timeout 40 ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
      --metrics gpu__time_duration.sum --csv $B bench model $W > $R/ncu_$v.csv 2> $R/ncu_$v.err
    echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.txt 2>&1; gzip -f $R/ncu_$v.csv; t ncu_$v
  done ) &
wait; t tests; snap
M="--ctx 1k,8k --kv int4,fp16 --no-linears --steps 32 --cache-len 128k --batch 1"
K="--ctx 8k --kv int4 --no-linears --steps 32 --cache-len 128k --batch 1"
for rep in 1 2; do
  BITDECODE_BATCH_INVARIANT=1 timeout 40 ./bitdecode.base bench model $M > $R/bbi_$rep.log 2>&1; t bbi$rep
  BITDECODE_BATCH_INVARIANT=1 timeout 40 ./bitdecode bench model $M > $R/nbi_$rep.log 2>&1; t nbi$rep
  timeout 40 ./bitdecode.base bench model $M > $R/bf_$rep.log 2>&1; t bf$rep
  timeout 40 ./bitdecode bench model $M > $R/nf_$rep.log 2>&1; t nf$rep
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_LINEAR_PERSISTENT=1 timeout 40 ./bitdecode bench model $M > $R/nbip_$rep.log 2>&1; t nbip$rep
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_NO_LINEAR_FOLD=1 timeout 30 ./bitdecode bench model $K > $R/nbi_nofold_$rep.log 2>&1; t nofold$rep
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_NO_LINEAR_EARLY=1 timeout 30 ./bitdecode bench model $K > $R/nbi_noearly_$rep.log 2>&1; t noearly$rep
  BITDECODE_BATCH_INVARIANT=1 BITDECODE_NO_LINEAR_EARLY=1 BITDECODE_NO_LINEAR_FOLD=1 timeout 30 ./bitdecode bench model $K > $R/nbi_none_$rep.log 2>&1; t none$rep
  snap
  [ $(( $(date +%s) - T0 )) -gt 250 ] && break
done
LEFT=$(( 280 - $(date +%s) + T0 ))
[ $LEFT -gt 15 ] && { timeout $LEFT ./bitdecode bench gemv --rows 1 > $R/gemv1.log 2>&1; echo "rc=$?" >> $R/gemv1.log; t gemv; }
snap
for f in $R/t?.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t?.log | head
grep -H "ms/step" $R/b*_?.log $R/n*_?.log | sed 's|.*/r/||' | head -60
grep -h "^## step\|rc=" $R/ncu_*.txt $R/ncu_*.err | head
cat $R/times.txt
