#!/bin/bash
# Session 20 (lead): decode plans by length bucket in the GPU paged cache (kvcache/gpukv lenBucket).
# Phase 1: the gpukv tests the change touches. Phase 2: the 8B step at B = 1 with a cache sized for
# 128K tokens a sequence (as serve's default) at 1K and 8K of context, base (bf4b4d6: plans at MaxLen)
# and new (5555cda: plans by length bucket) alternated, and new with a cache of the context's own size.
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
tst 170 gk1 gpukv.test '^(TestGPUCacheLengthBuckets|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant)$' kvcache/gpukv
tst 170 gk2 gpukv.test '^(TestGPUCacheMatchesReference|TestGPUScheduler|TestGPUPrefixBatched)$' kvcache/gpukv
(timeout 170 ./bitdecode bench model --ctx 1k --kv int4 --no-linears --steps 1 > $R/warm.log 2>&1) &
wait; t tests; snap
M="--ctx 1k,8k --kv int4,fp16 --no-linears --steps 16"
for rep in 1 2; do
  timeout 60 ./bitdecode-base bench model $M --cache-len 128k > $R/base_$rep.log 2>&1; t base$rep
  timeout 60 ./bitdecode bench model $M --cache-len 128k > $R/new_$rep.log 2>&1; t new$rep
  snap
done
timeout 60 ./bitdecode bench model $M > $R/own.log 2>&1; t own; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -H "ms/step" $R/base_*.log $R/new_*.log $R/own.log
cat $R/times.txt
