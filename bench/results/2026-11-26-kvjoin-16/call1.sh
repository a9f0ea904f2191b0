#!/bin/bash
# Session 16 (q|k|v packed, one launch), call 1: backend tests while both bitdecode binaries fill
# the kernel cache; BenchmarkQuantLinearGroupQKV (q|k|v apart against joined, T = 1 and 8, graphs);
# bench gemvq on q/o, k/v and the joined q|k|v shape; the B = 1 step with int4, int3 and int8
# weights, main's binary (4073eed) and this branch's alternated twice; B = 8 and B = 32 once each.
# Run from the repo root with .gpu-kvjoin/ carried (bundle.tar.xz).
set -o pipefail
cd .gpu-kvjoin; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
(timeout 150 ./bitdecode-base bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch 1 --steps 2 --no-linears > $R/warm_base.log 2>&1;
 timeout 150 ./bitdecode bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch 1 --steps 2 --no-linears > $R/warm_new.log 2>&1) &
(timeout 170 ./backend.test -test.v -test.timeout 170s -test.run 'TestJoinTiled|TestJoinWeights|TestFoldSwiGLUJoined|TestFoldRoPEAppend|TestFoldHalfAndRoPEJoined|TestFoldRoPE$|TestQuantLinear$|TestQuantLinearTiled|TestTiledOnlyCopy|TestQuantLinearGroupDEC|TestLinearGraphReplay|TestLinearGroup$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
wait; t tests; snap
run groupqkv 90 backend.test -test.run '^$' -test.bench QuantLinearGroupQKV -test.benchtime 200x -test.count 2
run gemvq 60 bitdecode bench gemvq --bits 4,3,8 --shapes "q/o proj,k/v proj,q|k|v" --splits 1,2,4,8
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run w_base_$i 60 bitdecode-base $W
  run w_new_$i 60 bitdecode $W
done
for B in 8 32; do
  run b${B}_base 45 bitdecode-base bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch $B --steps 16 --no-linears
  run b${B}_new 45 bitdecode bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch $B --steps 16 --no-linears
done
t end; snap; rm -rf $R
