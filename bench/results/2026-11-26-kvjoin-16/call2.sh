#!/bin/bash
# Session 16 (q|k|v packed, one launch), call 2: what the step's -0.2 ms comes from. TestJoinTiled
# and TestJoinTiledKnobs (this build) while both bitdecode binaries fill the kernel cache;
# BenchmarkQuantLinearGroupQKV at the joined launch's split S 4 (the rule), 2 and 8; the B = 1 step,
# base (main 4073eed), new, new with BITDECODE_GEMVQ_APART=1 (packed weights apart), new with
# BITDECODE_NO_ROPE_APPEND=1 (the append not folded), new at join splits 2 and 8, two rounds;
# B = 8 and 32 base/new once more. Run from the repo root with .gpu-kvjoin/ carried.
set -o pipefail
cd .gpu-kvjoin; G=$PWD; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
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
(timeout 150 ./backend.test -test.v -test.timeout 150s -test.run 'TestJoinTiled' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
wait; t tests; snap
for S in 0 2 8; do
  if [ $S = 0 ]; then unset BITDECODE_GEMVQ_JOIN_SPLIT; else export BITDECODE_GEMVQ_JOIN_SPLIT=$S; fi
  run groupqkv_s$S 60 backend.test -test.run '^$' -test.bench 'QuantLinearGroupQKV/.*/T=1' -test.benchtime 500x -test.count 2
done
unset BITDECODE_GEMVQ_JOIN_SPLIT
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
for i in 3 4; do
  run w_base_$i 40 bitdecode-base $W
  run w_new_$i 40 bitdecode $W
  BITDECODE_GEMVQ_APART=1 run w_apart_$i 40 bitdecode $W
  BITDECODE_NO_ROPE_APPEND=1 run w_noappend_$i 40 bitdecode $W
  BITDECODE_GEMVQ_JOIN_SPLIT=2 run w_s2_$i 40 bitdecode $W
  BITDECODE_GEMVQ_JOIN_SPLIT=8 run w_s8_$i 40 bitdecode $W
done
for B in 8 32; do
  run b${B}_base_2 40 bitdecode-base bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch $B --steps 16 --no-linears
  run b${B}_new_2 40 bitdecode bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch $B --steps 16 --no-linears
done
t end; snap; rm -rf $R
