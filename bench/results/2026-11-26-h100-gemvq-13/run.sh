#!/bin/bash
# run.sh (s13-gemvq, call 1): gemvq v3's GPU tests (kernels and backend/gpu in parallel), then,
# alone on the GPU, bench gemvq (v2 and v3 alternated per split) at T = 1 for int4/int8/int3 and
# at T = 2 for int4, and the B = 1 decode step (int4 weights, int4 KV, 1K and 32K) of this
# branch with v3 (the default) and with BITDECODE_GEMVQ_V2=1 (v2, as main), alternated.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=100
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference|TestGEMVQDECMatchesSerial|TestGridDependentKernelsWait|TestProgramsShareTheHeader)$'
tst backend backend.test '^(TestQuantLinear|TestModelQuantMatchesCPU|TestModelDECMatchesCPU|TestQuantLinearDEC|TestModelMatchesCPU)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run gemvq_t1 40 bitdecode bench gemvq --bits 4,8,3 --splits 1,2,4,8 --json $R/gemvq_t1.json
M="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_v3_$i 30 bitdecode $M --json $R/model_v3_$i.json
  (export BITDECODE_GEMVQ_V2=1; run model_v2_$i 30 bitdecode $M --json $R/model_v2_$i.json)
done
run gemvq_t2 25 bitdecode bench gemvq --rows 2 --bits 4 --splits 1,2,4 --json $R/gemvq_t2.json
t end; snap; rm -rf $R
