#!/bin/bash
# Session 20 (lead), call 2: the bit-plane cache's decode plans by length bound (f978592) against
# ea1a91b (plans at MaxLen, grid by liveBound). Phase 1: the planes tests. Phase 2: the 8B step at
# B = 1 with all-8-bit and all-16-bit bw reads at 8K in a cache of 128K, base and new alternated.
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
tst 170 gp1 gpukv.test '^(TestGPUPlaneCacheLiveBounds|TestLiveBound)$' kvcache/gpukv
tst 170 gp2 gpukv.test '^(TestGPUPlaneCacheMatchesReference|TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy)$' kvcache/gpukv
(timeout 170 ./bitdecode bench model --ctx 1k --kv bw:m100:w0:s0 --no-linears --steps 1 > $R/warm.log 2>&1) &
wait; t tests; snap
M="--ctx 8k --kv bw:m100:w0:s0,bw:h100:w0:s0 --no-linears --steps 16 --cache-len 128k"
for rep in 1 2; do
  timeout 60 ./bitdecode-base bench model $M > $R/base_$rep.log 2>&1; t base$rep
  timeout 60 ./bitdecode bench model $M > $R/new_$rep.log 2>&1; t new$rep
  snap
done
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -H "ms/step" $R/base_*.log $R/new_*.log
cat $R/times.txt
