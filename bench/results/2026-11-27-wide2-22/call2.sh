#!/bin/bash
# Session 22 (wide2), call 2: linear.cu v8 after call 1 (the deep ring, BN 64 in clusters of 2 at one
# CTA an SM, only above 64 rows where its grid fits at once: o and down at 65-128 rows; the first
# weight stage before the dependency wait under EarlyWeights). Tests (parallel, bench caches warmed
# beside them), the wide sweep, BITDECODE_BATCH_INVARIANT=1 bench gemv --rows 55,100,256 base / new /
# new without early weights (BITDECODE_NO_LINEAR_EARLY=1) x3 alternated, the int4 55 x 32K step
# (batch-invariant) base / new / new-noearly x2 alternated, and the int4 100 x 16K step (o and down
# at 100 rows) base / new x2 alternated. base = main f2b5946.
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
run() { local v=$1 tag=$2; shift 2; env BITDECODE_BATCH_INVARIANT=1 "$@" > $R/$tag.log 2>&1; t $tag; }
for rep in 1 2 3; do
  run base gemv_base_$rep timeout 60 ./base bench gemv --rows 55,100,256
  run new gemv_new_$rep timeout 60 ./new bench gemv --rows 55,100,256
  run new gemv_ne_$rep BITDECODE_NO_LINEAR_EARLY=1 timeout 60 ./new bench gemv --rows 55,100,256
  snap
  [ $(( $(date +%s) - T0 )) -gt 170 ] && break
done
M="--ctx 32k --kv int4 --batch 55 --steps 16 --no-linears"
M100="--ctx 16k --kv int4 --batch 100 --steps 16 --no-linears"
for rep in 1 2; do
  run base m_bi_base_$rep timeout 40 ./base bench model $M
  run new m_bi_new_$rep timeout 40 ./new bench model $M
  run new m_bi_ne_$rep BITDECODE_NO_LINEAR_EARLY=1 timeout 40 ./new bench model $M
  snap
  [ $(( $(date +%s) - T0 )) -gt 220 ] && break
done
for rep in 1 2; do
  run base m100_base_$rep timeout 40 ./base bench model $M100
  run new m100_new_$rep timeout 40 ./new bench model $M100
  snap
  [ $(( $(date +%s) - T0 )) -gt 250 ] && break
done
for f in $R/t?.log $R/sweep.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -- "--- FAIL" $R/t?.log | head -20
grep -h "sweep " $R/sweep.log | sed 's/.*sweep /sweep /' | cut -c1-60,200-400
grep -h "read ceiling" $R/gemv_*.log | head -3
grep -H "^linear \(q/o\|qkv\|gate+up\|down\|lm_head\)" $R/gemv_*.log | sed 's|.*/r/||' | cut -c1-75
grep -H "| int4" $R/m*.log | sed 's|.*/r/||' | cut -c1-110
cat $R/times.txt
