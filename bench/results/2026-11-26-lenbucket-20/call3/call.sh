#!/bin/bash
# Session 20 (lead), call 3: batch-invariant caches (serve's default) planned by length bucket too.
# new = the commit after 96a425e (lenBucket without its BatchInvariant case); base = the same tree
# with that case restored (plans and grids at MaxLen, 512-token splits either way).
# Phase 1: the batch-invariance tests. Phase 2: BITDECODE_BATCH_INVARIANT=1 (the backend's and, through
# bench model, the cache's invariant mode, as serve's default) at 8K in a cache of 128K, B = 1 and 16.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 170 gi1 gpukv.test '^(TestGPUCacheBatchInvariant|TestGPUBatchInvariantLogits)$' kvcache/gpukv
(BITDECODE_BATCH_INVARIANT=1 timeout 170 ./bitdecode bench model --ctx 1k --kv int4 --no-linears --steps 1 > $R/warm.log 2>&1) &
wait; t tests; snap
export BITDECODE_BATCH_INVARIANT=1
M="--ctx 8k --kv int4,fp16 --no-linears --steps 16 --cache-len 128k"
for rep in 1 2; do
  timeout 60 ./bitdecode-base bench model $M --batch 1 > $R/base_b1_$rep.log 2>&1; t base1_$rep
  timeout 60 ./bitdecode bench model $M --batch 1 > $R/new_b1_$rep.log 2>&1; t new1_$rep
  snap
done
timeout 60 ./bitdecode-base bench model $M --batch 16 > $R/base_b16.log 2>&1; t base16
timeout 60 ./bitdecode bench model $M --batch 16 > $R/new_b16.log 2>&1; t new16
snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -H "ms/step" $R/base_*.log $R/new_*.log
cat $R/times.txt
