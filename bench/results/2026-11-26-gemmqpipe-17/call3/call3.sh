#!/bin/bash
# Session 17, helper gemmqpipe, call 3: the final rule (int4/int3: 32 tokens with two warp groups, then
# 64 tokens on 4 warps for gate/up/down and 64 with two warp groups for q/o). Tests (float64 bound, backend),
# kernel bench (main's binary and this branch's, the rule's tiling), then the step: main 43f4d0f (base),
# call 2's rule (prev) and this rule (new), alternated.
set -o pipefail
G=$PWD/.gpu-gemmqpipe; R=$OUT/r; mkdir -p $R; cp $G/call3.sh $R/
cd $G && tar xJf bins.tar.xz && chmod +x bitdecode* *.test && cd - >/dev/null
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1 n=$2 dir=$3 bin=$4 re=$5; (cd $dir && timeout $to $G/$bin -test.v -test.timeout ${to}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); t $n; }
tst 230 kgemmq gpu/kernels kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs)$' &
tst 240 backend backend/gpu backend.test '^(TestQuantLinearTiled|TestQuantLinear|TestGEMMQRoutes|TestJoinTiled|TestLinearGraphReplay)$' &
( for b in bitdecode-base bitdecode-prev bitdecode; do timeout 150 $G/$b bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch 64 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
P='T=(24|32|48|64|100|128)$'
(cd gpu/kernels && timeout 120 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/auto\$" > $R/bench_base.log 2>&1; echo "rc=$?" >> $R/bench_base.log); t bench_base; snap
(cd gpu/kernels && timeout 120 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/auto\$" > $R/bench_new.log 2>&1; echo "rc=$?" >> $R/bench_new.log); t bench_new; snap
run() { local n=$1 bin=$2; shift 2; timeout 90 $G/$bin bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; }
for i in 1 2; do for b in 48 64 128; do for v in base prev new; do bin=bitdecode-$v; [ $v = new ] && bin=bitdecode; run m${b}_${v}_$i $bin --batch $b; done; snap; done; done
for b in 24 32 96; do for v in base new; do bin=bitdecode-$v; [ $v = new ] && bin=bitdecode; run m${b}_${v}_1 $bin --batch $b; done; done
t end; snap
for f in $R/k*.log $R/backend*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
for b in 24 32 48 64 96 128; do for f in $R/m${b}_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | awk '{print $1, $9}' | tr '\n' ' ')"; done; done
grep -h "read ceiling" $R/bench_*.log
cat $R/times.txt
