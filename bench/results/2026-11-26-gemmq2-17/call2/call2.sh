#!/bin/bash
# Session 17b, helper gemmq2, call 2: the WG tilings with x's copies dealt for the core matrices (2-way, not 8-way bank conflicts), the rule 32 tokens mma.sync, 64 and 128 wgmma. Tests (float64 bound, backend) in
# parallel with the step binaries' warm-up, then BenchmarkGEMMQ (main 92baeca's binary: the rule;
# this branch's: the rule and every tiling at its auto split; fp16 cuBLASLt), then the step of main
# (base) and this branch (new), alternated twice.
set -o pipefail
G=$PWD/.gpu-gemmq2; R=$OUT/r; mkdir -p $R; cp $G/call2.sh $R/
cd $G && tar xJf bins.tar.xz && chmod +x bitdecode* *.test && cd - >/dev/null
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1 n=$2 dir=$3 bin=$4 re=$5; (cd $dir && timeout $to $G/$bin -test.v -test.timeout ${to}s -test.run "$re" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log); t $n; }
tst 230 kgemmq gpu/kernels kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs)$' &
tst 240 btiled backend/gpu backend.test '^TestQuantLinearTiled$' &
tst 200 backend backend/gpu backend.test '^(TestQuantLinear|TestGEMMQRoutes|TestJoinTiled|TestLinearGraphReplay)$' &
( for b in bitdecode-base bitdecode; do timeout 150 $G/$b bench model --ctx 1k --kv int4 --weights int4,int8 --batch 64 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
S='(14336x4096|4096x14336|4096x4096)'; P='T=(24|32|48|64|100|128)$'
(cd gpu/kernels && timeout 120 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/$S/$P/default/auto\$" > $R/bench_base.log 2>&1; echo "rc=$?" >> $R/bench_base.log); t bench_base; snap
(cd gpu/kernels && timeout 150 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int[348]/$S/$P/default/(auto|c[0-9]+-[^/]*-auto)\$" > $R/bench_new.log 2>&1; echo "rc=$?" >> $R/bench_new.log); t bench_new; snap
(cd gpu/kernels && timeout 150 $G/kernels.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/int4/14336x4096/T=(24|64|128)\$/(loads|math)/(auto|c(3|6|8|10)-[^/]*-auto)\$" > $R/bench_diag.log 2>&1; echo "rc=$?" >> $R/bench_diag.log); t bench_diag; snap
(cd gpu/kernels && timeout 90 $G/kernels-base.test -test.run '^$' -test.benchtime 1x -test.bench "GEMMQ/^fp16\$/$S/T=(32|48|64|128)\$" > $R/bench_fp16.log 2>&1; echo "rc=$?" >> $R/bench_fp16.log); t bench_fp16; snap
run() { local n=$1 bin=$2; shift 2; timeout 60 $G/$bin bench model --ctx 1k --kv int4 --weights fp16,int4,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; }
for i in 1 2; do for b in 32 48 64 128; do for v in base new sync; do bin=bitdecode-$v; [ $v = new ] && bin=bitdecode; if [ $v = sync ]; then export BITDECODE_GEMMQ_MMASYNC=1; run m${b}_${v}_$i bitdecode --batch $b; unset BITDECODE_GEMMQ_MMASYNC; else run m${b}_${v}_$i $bin --batch $b; fi; done; done; snap; done
t end; snap
for f in $R/k*.log $R/b*.log; do case $f in *bench*) continue;; esac; echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h -A3 -- '--- FAIL' $R/k*.log $R/b*.log | head -20
for b in 32 48 64 128; do for f in $R/m${b}_*.log; do echo "$(basename $f .log): $(grep -h 'ms/step' $f | awk '{print $1, $9}' | tr '\n' ' ')"; done; done
grep -h "read ceiling" $R/bench_*.log
for f in $R/bench_*.log; do echo "== $f"; grep -E "^Benchmark" $f | grep -E "/auto|fp16" | awk '{for(i=2;i<=NF;i++) if($i=="us") u=$(i-1); print $1, u}' | sed 's/BenchmarkGEMMQ\///; s/-[0-9]* / /' | head -80; done
cat $R/times.txt
