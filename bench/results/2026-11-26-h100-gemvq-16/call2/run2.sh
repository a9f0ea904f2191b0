#!/bin/bash
# run2.sh (s14-gemvq, call 2): v5.1 (gemvq4.cu gemv_q5 with coalesced 128-byte copies of the
# codes; Launch's kernel for int4 at T = 1, >= 2048 rows) against v5.0 (each lane's own copies,
# call 1's), v3.2 and v4.1. TestGEMVQMatchesReference's T = 1 cases with groups of 128/256
# (every v4/v5 case) and TestQuantLinear first, then alone on the GPU: bench gemvq (int4, int8;
# gate/up, down; splits 2, 4, 8; v2-v5.1 alternated at each), the B = 1 decode step (int4 KV;
# int4, int3, int8 weights; 1K and 32K) with main's binary and this branch's alternated twice.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz from build.sh run2.sh).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/run2.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 50 ./$2 -test.v -test.timeout 50s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^TestGEMVQMatchesReference$/^int.-g(128|256)-T1-'
tst backend backend.test '^(TestQuantLinear)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run gemvq_1 25 bitdecode bench gemvq --bits 4,8 --shapes gate/up,down --splits 2,4,8 --json $R/gemvq_1.json
M="bench model --ctx 1k,32k --kv int4 --weights int4,int3,int8 --batch 1 --steps 32 --no-linears"
if grep -q '^rc=0' $R/kernels.log; then
  for i in 1 2; do
    run model_main_$i 15 bitdecode-main $M --json $R/model_main_$i.json
    run model_v51_$i 15 bitdecode $M --json $R/model_v51_$i.json
  done
fi
t end; snap; rm -rf $R
