#!/bin/bash
# Session 17, helper gemmqpipe, call 1: tests of the changed gemmq.cu (float64 reference, every
# tiling incl. the KS=2 ones; backend's tiled Linear), then the kernel bench (main's binary and this
# branch's), the decode step A/B (main 43f4d0f and this branch alternated), then diagnostics.
set -o pipefail
G=$PWD/.gpu-gemmqpipe; R=$OUT/r; mkdir -p $R; cp $G/call1.sh $R/
cd $G && tar xJf bins.tar.xz && chmod +x bitdecode* *.test && cd - >/dev/null
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1 n=$2 dir=$3 bin=$4 re=$5; (cd $dir && timeout $to $G/$bin -test.v -test.timeout ${to}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); t $n; }
tst 230 kgemmq gpu/kernels kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs)$' &
tst 240 backend backend/gpu backend.test '^(TestQuantLinearTiled|TestQuantLinear|TestGEMMQRoutes|TestJoinTiled|TestLinearGraphReplay)$' &
( for b in bitdecode-base bitdecode; do timeout 150 $G/$b bench model --ctx 1k --kv int4 --weights int4,int8 --batch 32 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
P='T=(24|32|48|64|128)$'
(cd gpu/kernels && timeout 120 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/auto\$" > $R/bench_base.log 2>&1; echo "rc=$?" >> $R/bench_base.log); t bench_base; snap
(cd gpu/kernels && timeout 150 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/(auto|c[0-9]-[^/]*-auto)\$" > $R/bench_new.log 2>&1; echo "rc=$?" >> $R/bench_new.log); t bench_new; snap
(cd gpu/kernels && timeout 60 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/fp16/[^/]*/$P" > $R/bench_fp16.log 2>&1; echo "rc=$?" >> $R/bench_fp16.log); t bench_fp16; snap
run() { local n=$1 bin=$2; shift 2; timeout 90 $G/$bin bench model --ctx 1k --kv int4 --weights fp16,int4,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
for i in 1 2; do for b in 32 64; do run m${b}_base_$i bitdecode-base --batch $b; run m${b}_new_$i bitdecode --batch $b; done; done
(cd gpu/kernels && timeout 150 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int4/14336x4096/T=(32|64|128)\$/(loads|math|copyloops)/(auto|c[0-5]-[^/]*-auto)\$" > $R/bench_diag.log 2>&1; echo "rc=$?" >> $R/bench_diag.log); t bench_diag; snap
t end; snap
for f in $R/k*.log $R/backend.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
for f in $R/m*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
grep -h "read ceiling" $R/bench_*.log
for f in $R/bench_base.log $R/bench_new.log $R/bench_fp16.log $R/bench_diag.log; do echo "== $f"; awk '/Benchmark/{for(i=2;i<=NF;i++) if($i=="us") print substr($1,16), $(i-1)}' $f | sed 's/-[0-9]* / /' ; done | head -400 > $R/summary.txt
grep -h "^gemmq int" $R/bench_new.log | head -30
cat $R/times.txt
