#!/bin/bash
# Session 16 (int8 over the tiled layout), call 2: BenchmarkQuantLinearLayout's int8 rows (T = 1-2048,
# wq's layout against the tiled one, alternated at each T) while nothing else runs; `bench gemvq
# --bits 8` on k/v (v3.2 = v3 against v6.1 = v8); then the B = 1 int8 step, main's binary (f37916d)
# and this branch's alternated three more times, and the B = 8 int8 step (v2 over either layout)
# alternated twice. Run from the repo root with .gpu-int8/ carried (bundle.tar.xz).
set -o pipefail
cd .gpu-int8; G=$PWD; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
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
# Fill the kernel cache of both bitdecode binaries while the benchmark compiles its own.
(timeout 150 ./bitdecode-base bench model --ctx 1k --kv int4 --weights int8 --batch 1 --steps 2 --no-linears > $R/warm_base.log 2>&1;
 timeout 150 ./bitdecode bench model --ctx 1k --kv int4 --weights int8 --batch 1 --steps 2 --no-linears > $R/warm_new.log 2>&1) &
wait
run layout 200 backend.test -test.run '^$' -test.bench 'QuantLinearLayout/int8' -test.benchtime 100x -test.count 2
run gemvqkv 60 bitdecode bench gemvq --bits 8 --shapes "k/v proj" --splits 1,2,4,8
W="bench model --ctx 1k,32k --kv int4 --weights int8 --batch 1 --steps 32 --no-linears"
W8="bench model --ctx 1k --kv int4 --weights int8 --batch 8 --steps 32 --no-linears"
for i in 3 4 5; do
  run w_base_$i 40 bitdecode-base $W
  run w_new_$i 40 bitdecode $W
done
for i in 1 2; do
  run b8_base_$i 40 bitdecode-base $W8
  run b8_new_$i 40 bitdecode $W8
done
t end; snap; rm -rf $R
