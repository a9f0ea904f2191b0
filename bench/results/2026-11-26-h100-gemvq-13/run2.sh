#!/bin/bash
# run2.sh (s13-gemvq, call 2): v3.1 (x staged through shared memory) on the H100: its GPU tests
# (kernels' reference test, backend/gpu's TestQuantLinear: T = 1, 2 through the backend), then,
# alone on the GPU, bench gemvq (v2 and v3 alternated) at T = 1 for int4/int8/int3 and T = 2 for
# int4, two launch-bound variants, and the B = 1 decode step (int4 weights, int4 KV, 1K and
# 32K) of this branch and of main's binary (97c35bf) alternated, and this branch with v2.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz from build.sh run2.sh).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/run2.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=70
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference)$'
tst backend backend.test '^(TestQuantLinear)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run gemvq_t1 40 bitdecode bench gemvq --bits 4,8,3 --splits 1,2,4,8 --json $R/gemvq_t1.json
M="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_v3_$i 30 bitdecode $M --json $R/model_v3_$i.json
  run model_main_$i 30 bitdecode-main $M --json $R/model_main_$i.json
done
(export BITDECODE_GEMVQ_V2=1; run model_v2_1 30 bitdecode $M --json $R/model_v2_1.json)
run gemvq_t2 25 bitdecode bench gemvq --rows 2 --bits 4,8,3 --splits 1,2,4 --json $R/gemvq_t2.json
run gemvq_mb 25 bitdecode bench gemvq --bits 4 --shapes gate/up,down,q/o\ proj --splits 2,4 --variants 'GEMVQ3_MIN_BLOCKS=8;GEMVQ3_MIN_BLOCKS=4' --json $R/gemvq_mb.json
t end; snap; rm -rf $R
