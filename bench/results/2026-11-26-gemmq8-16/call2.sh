#!/bin/bash
# Session 16, helper gemmq8, call 2: the routing and tilings chosen from call 1 (int8's rule on
# two-block steps; int8 to gemmq.cu from 2048 rows, up to 64 rows of x under 32M codes). Tests
# (the float64 reference, the q|k|v join, the routing), the rule's kernel times, then the B = 32 /
# 64 steps, main's binary (36aa87c) and this branch's alternated. Run with .gpu-gemmq8 carried.
set -o pipefail
cd .gpu-gemmq8; G=$PWD; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1 n=$2 bin=$3 re=$4; shift 4; timeout $to ./$bin -test.v -test.timeout ${to}s -test.run "$re" "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; }
tst 200 kgemmq kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs)$' &
tst 200 join backend.test '^(TestJoinTiled|TestQuantLinear|TestGEMMQRoutes|TestLinearGraphReplay)$' &
( for b in bitdecode-base bitdecode; do timeout 100 ./$b bench model --ctx 1k --kv int4 --weights int8 --batch 32 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
timeout 100 ./kernels.test -test.run '^$' -test.benchtime 1x -test.bench 'GEMMQ/int8/./T=(24|32|48|64|128)$/default/auto$' > $R/bench_gemmq.log 2>&1; echo "rc=$?" >> $R/bench_gemmq.log; t bench; snap
run() { local n=$1 bin=$2; shift 2; timeout 90 ./$bin bench model --ctx 1k --kv int4 --weights fp16,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
for i in 1 2; do
  for b in 32 64; do
    run m${b}_base_$i bitdecode-base --batch $b
    run m${b}_new_$i bitdecode --batch $b
  done
done
t end; snap
for f in $R/*.log; do case $f in *warm*) continue;; esac; echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
for f in $R/m*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
grep -h "read ceiling" $R/bench_gemmq.log
awk '/Benchmark/{for(i=2;i<=NF;i++) if($i=="us") print substr($1,16), $(i-1)}' $R/bench_gemmq.log
cat $R/times.txt
