#!/bin/bash
# Session 16, helper gemmq8, call 1: int8 in gemmq.cu. Tests (int4/int3 digests of main's
# kernels against this branch's, the float64 reference with int8, the backend's tiled Linear
# and q|k|v join), then BenchmarkGEMMQ's int8 sweep and the B = 32 / 64 steps, main's binary
# (36aa87c) and this branch's alternated. Run from the repo root with .gpu-gemmq8 carried.
set -o pipefail
cd .gpu-gemmq8; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
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
# Phase 1: tests in parallel, and the caches warmed for phase 2 (timings discarded).
( BITDECODE_GEMMQ_DIGESTS=$R/digests.txt tst 200 digest_base kernels-base.test '^TestGEMMQDigest$'
  BITDECODE_GEMMQ_DIGESTS=$R/digests.txt tst 150 digest_new kernels.test '^TestGEMMQDigest$' ) &
tst 220 kgemmq kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs|TestGEMVQTiledMatchesWQ)$' &
tst 280 qltiled backend.test '^TestQuantLinearTiled$' &
tst 220 join backend.test '^(TestJoinTiled|TestQuantLinear|TestLinearGraphReplay)$' &
( timeout 150 ./kernels.test -test.run '^$' -test.bench 'GEMMQ/int8/1024x4096/T=24/(loads|math)/auto$' -test.benchtime 1x > $R/warm_k.log 2>&1
  for b in bitdecode-base bitdecode; do timeout 100 ./$b bench model --ctx 1k --kv int4 --weights int8 --batch 32 --steps 2 --no-linears > $R/warm_$b.log 2>&1; done; t warm ) &
wait; t tests; snap
# Phase 2: the kernel alone, then the steps.
timeout 150 ./kernels.test -test.run '^$' -test.benchtime 1x \
  -test.bench 'GEMMQ/int8/./T=(24|32|48|64|128)$/default|GEMMQ/int8/14336x4096/T=(32|64)$/(loads|math)|GEMMQ/int8/./T=(24|32|48|64|128)$/deq|GEMMQ/fp16/./T=(24|32|48|64|128)$' \
  > $R/bench_gemmq.log 2>&1; echo "rc=$?" >> $R/bench_gemmq.log; t bench; snap
run() { local n=$1 bin=$2; shift 2; timeout 90 ./$bin bench model --ctx 1k --kv int4 --weights fp16,int8 --steps 16 --no-linears "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
for i in 1 2; do
  for b in 32 64; do
    run m${b}_base_$i bitdecode-base --batch $b
    run m${b}_new_$i bitdecode --batch $b
  done
done
BITDECODE_GEMMQ_OFF=1 run m32_off bitdecode --batch 32
t end; snap
for f in $R/*.log; do case $f in *warm*) continue;; esac; echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h "equal\|differ\|wrote" $R/digest_*.log | head -5
for f in $R/m*.log; do echo "== $(basename $f)"; grep -h "ms/step" $f; done
grep -h "read ceiling" $R/bench_gemmq.log
grep -E "/auto-|/deq-|fp16/" $R/bench_gemmq.log | grep -v "/c[0-9]" | awk '{for(i=2;i<=NF;i++) if($i=="us") print substr($1,16), $(i-1)}' | head -80
cat $R/times.txt
