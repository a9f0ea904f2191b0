#!/bin/bash
# run1.sh (s14-gemvq, call 1): v5 (gemvq4.cu gemv_q5, v4's math fed by a cp.async ring) against
# v3.2 and v4.1. The GPU tests first (gpu/kernels' TestGEMVQMatchesReference beside backend/gpu's
# TestQuantLinear; gocoder-23m stays home: the carry's 64 MiB), then alone on
# the GPU: bench gemvq at T = 1 (int4, int8, int3; splits 1, 2, 4, 8: v2, v3.2, v4.1 and v5
# alternated at each, one process, one ceiling), the B = 1 decode step (int4 KV; int4, int3,
# int8 weights; 1K and 32K) with main's binary (v3.2 int4/int3, v4.1 int8) and this branch's (v5
# for every width at >= 2048 rows) alternated twice; a ring-depth variant if time is left.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz from build.sh run1.sh).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/run1.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 70 ./$2 -test.v -test.timeout 70s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference)$'
tst backend backend.test '^(TestQuantLinear)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run gemvq_1 60 bitdecode bench gemvq --bits 4,8,3 --splits 1,2,4,8 --json $R/gemvq_1.json
M="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_main_$i 25 bitdecode-main $M --json $R/model_main_$i.json
  run model_v5_$i 25 bitdecode $M --json $R/model_v5_$i.json
done
if [ $SECONDS -lt 125 ]; then run gemvq_r3 30 bitdecode bench gemvq --bits 4 --shapes gate/up,down --splits 2,4,8 --variants "GEMVQ5_STAGES=3"; fi
t end; snap; rm -rf $R
