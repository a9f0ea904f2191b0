#!/bin/bash
# Session 22 (wide2), call 1: linear.cu v8 (the BN-64 clustered tiled kernel in an 8-stage ring at one
# CTA an SM; the tiled kernels' first weight stages before the dependency wait under EarlyWeights).
# Tests (parallel, bench caches warmed beside them), the wide sweep (every BN x cluster size, the deep
# variants, v3, auto without/with early weights), BITDECODE_BATCH_INVARIANT=1 bench gemv --rows
# 55,100,256 base/new x3 alternated, the int4 55 x 32K step batch-invariant base/new x3 alternated.
# base = main f2b5946.
set -o pipefail
cd .gpu-wide2; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x base new *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
T0=$(date +%s)
t() { echo "$(date -u +%T) $(( $(date +%s) - T0 ))s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/backend/gpu $G/gpu/kernels
tst() { local to=$1; shift; (cd $G/$4 && env $5 timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 170 tk kernels.test '^(TestLinear.*|TestGridDependentKernelsWait)$' gpu/kernels X=0
tst 170 tb backend.test '^(TestLinear.*|TestBatchInvariantLinear)$' backend/gpu X=0
( BITDECODE_BATCH_INVARIANT=1 timeout 120 ./base bench gemv --rows 17 > $R/warm_b.log 2>&1; t warm_b
  BITDECODE_BATCH_INVARIANT=1 timeout 120 ./new bench gemv --rows 17 > $R/warm_n.log 2>&1; t warm_n ) &
wait; t tests; snap
tst 100 sweep kernels.test '^TestLinearWideSweep$' gpu/kernels BITDECODE_WIDE_SWEEP=1
wait; t sweep; snap
for rep in 1 2 3; do
  for v in base new; do
    BITDECODE_BATCH_INVARIANT=1 timeout 60 ./$v bench gemv --rows 55,100,256 > $R/gemv_${v}_$rep.log 2>&1; t gemv_${v}_$rep
  done
  snap
  [ $(( $(date +%s) - T0 )) -gt 190 ] && break
done
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
for rep in 1 2 3; do
  for v in base new; do
    BITDECODE_BATCH_INVARIANT=1 timeout 40 ./$v bench model $M > $R/m_bi_${v}_$rep.log 2>&1; t m_bi_${v}_$rep
  done
  snap
  [ $(( $(date +%s) - T0 )) -gt 230 ] && break
done
for f in $R/t?.log $R/sweep.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t?.log | head -20
grep -h "sweep " $R/sweep.log | sed 's/.*sweep /sweep /'
grep -h "read ceiling" $R/gemv_*.log | head -4
grep -H "^linear \(q/o\|qkv\|gate+up\|down\|lm_head\)" $R/gemv_*.log | sed 's|.*/r/||' | cut -c1-112
grep -H "| int4" $R/m_*.log | sed 's|.*/r/||' | cut -c1-120
cat $R/times.txt
