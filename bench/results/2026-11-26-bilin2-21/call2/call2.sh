#!/bin/bash
# NOT RUN (session 21 bilin2 had one call). The next call for l2always.patch: apply it on s21-bilin2's
# head (or main once that is merged: bench gemv must have Options.SetLinear on both sides, or base's
# linear.cu column runs without persistent grids), build bitdecode (new) and kernels.test / gpu.test /
# gpukv.test from it, bitdecode.base from the tree without the patch, xz them into
# .gpu-bilin2/a.tar.xz beside this script; run as `bash .gpu-bilin2/call2.sh` with carry [".gpu-bilin2"],
# kind nvidia-h100-x1, timeout_s ~170 (call1 of this folder took 111 s of wall with one more variant).
# The patch changes only the narrow kernels' weight loads (.L2::256B, compile time, no flag): the tests
# are the bitwise ones (narrow = wide, a row alone = in the batch, pair kernels = ops apart).
set -o pipefail
cd .gpu-bilin2; G=$PWD; R=$OUT/r; mkdir -p $R
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
tst() { local to=$1; shift; (cd $G/$4 && env $5 timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 150 tk kernels.test '^(TestLinear.*|TestGridDependentKernelsWait)$' gpu/kernels X=0
tst 150 tb gpu.test '^(TestLinear.*|TestBatchInvariantLinear|TestFoldSwiGLU|TestFoldRoPE)$' backend/gpu X=0
tst 150 tg gpukv.test '^(TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant)$' kvcache/gpukv X=0
BI=BITDECODE_BATCH_INVARIANT=1
W="--ctx 8k --kv int4 --no-linears --steps 2 --cache-len 128k --batch 1"
( env $BI timeout 100 ./bitdecode.base bench model $W > $R/warm_b.log 2>&1; t warm_b
  env $BI timeout 60 ./bitdecode bench model $W > $R/warm_n.log 2>&1; t warm_n ) &
wait; t tests; snap
for rep in 1 2; do
  for b in base new; do
    B=./bitdecode; [ $b = base ] && B=./bitdecode.base
    env $BI timeout 25 $B bench gemv --rows 1 > $R/gemv_${b}_$rep.log 2>&1; t gemv_${b}_$rep
  done
done
snap
M="--ctx 1k,8k --kv int4,fp16 --no-linears --steps 32 --cache-len 128k --batch 1"
for rep in 1 2 3; do
  env $BI timeout 20 ./bitdecode.base bench model $M > $R/m_base_$rep.log 2>&1; t m_base_$rep
  env $BI timeout 20 ./bitdecode bench model $M > $R/m_new_$rep.log 2>&1; t m_new_$rep
  snap
  [ $(( $(date +%s) - T0 )) -gt 140 ] && break
done
timeout 15 ./bitdecode bench model $M > $R/m_fast_new.log 2>&1; t m_fast_new
timeout 15 ./bitdecode.base bench model $M > $R/m_fast_base.log 2>&1; t m_fast_base
snap
for f in $R/t?.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t?.log | head
grep -H "read ceiling\|^linear \(o\|q/o\|qkv\|gate+up\|down\|lm_head\)" $R/gemv_*.log | sed 's|.*/r/||' | cut -c1-150
grep -H "| int4\|| fp16:" $R/m_*.log | sed 's|.*/r/||' | awk -F'|' '{print $1, $4, $5, $8, $9}'
cat $R/times.txt
