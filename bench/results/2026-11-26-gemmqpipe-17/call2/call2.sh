#!/bin/bash
# Session 17, helper gemmqpipe, call 2: tests of the final kernels (every tiling, float64 bound; backend's
# tiled Linear, the q|k|v join and graph replay, also with int4/int3 k and v on gemmq.cu), the kernel bench
# (main's binary and this branch's, every tiling; the dequantization path for q/o and k/v), then the step:
# main 43f4d0f (base), this branch's rule (new), the 64-token 4-warp tiling at 33-64 rows (c6) and k/v on
# gemmq.cu (kv), alternated.
set -o pipefail
G=$PWD/.gpu-gemmqpipe; R=$OUT/r; mkdir -p $R; cp $G/call2.sh $R/
cd $G && tar xJf bins.tar.xz && chmod +x bitdecode* *.test && cd - >/dev/null
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1 n=$2 dir=$3 bin=$4 re=$5; (cd $dir && timeout $to $G/$bin -test.v -test.timeout ${to}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); t $n; }
BT='^(TestQuantLinearTiled|TestQuantLinear|TestGEMMQRoutes|TestJoinTiled|TestLinearGraphReplay)$'
tst 230 kgemmq gpu/kernels kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs)$' &
tst 240 backend backend/gpu backend.test "$BT" &
tst 240 backend_kv backend/gpu backend-kv.test "$BT" &
( for b in bitdecode-base bitdecode bitdecode-c6 bitdecode-kv; do timeout 150 $G/$b bench model --ctx 1k --kv int4 --weights int4,int3,int8 --batch 64 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
P='T=(24|32|48|64|128)$'
(cd gpu/kernels && timeout 120 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/auto\$" > $R/bench_base.log 2>&1; echo "rc=$?" >> $R/bench_base.log); t bench_base; snap
(cd gpu/kernels && timeout 150 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/[^/]*/$P/default/(auto|c[0-9]-[^/]*-auto)\$" > $R/bench_new.log 2>&1; echo "rc=$?" >> $R/bench_new.log); t bench_new; snap
(cd gpu/kernels && timeout 100 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/(4096x4096|1024x4096)/$P/deq\$" > $R/bench_deq.log 2>&1; echo "rc=$?" >> $R/bench_deq.log); t bench_deq; snap
run() { local n=$1 bin=$2; shift 2; timeout 90 $G/$bin bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; }
for i in 1 2; do for b in 32 64; do for v in base new c6 kv; do bin=bitdecode-$v; [ $v = new ] && bin=bitdecode; run m${b}_${v}_$i $bin --batch $b; done; snap; done; done
for b in 24 48 128; do for v in base new; do bin=bitdecode-$v; [ $v = new ] && bin=bitdecode; run m${b}_${v}_1 $bin --batch $b; done; done; snap
(cd gpu/kernels && timeout 120 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int4/14336x4096/T=(64|128)\$/(loads|math)/(c[0-6]-[^/]*-auto)\$" > $R/bench_diag.log 2>&1; echo "rc=$?" >> $R/bench_diag.log); t bench_diag
t end; snap
for f in $R/k*.log $R/backend*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
for b in 32 64 24 48 128; do for f in $R/m${b}_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | awk '{print $1, $9}' | tr '\n' ' ')"; done; done
grep -h "read ceiling" $R/bench_*.log
cat $R/times.txt
