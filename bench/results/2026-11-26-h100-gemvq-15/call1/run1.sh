#!/bin/bash
# run1.sh (s13-gemvq3, call 1): v4 (gemvq4.cu) against v3.2 in one binary. The GPU tests first
# (gpu/kernels' TestGEMVQMatchesReference beside backend/gpu's TestQuantLinear,
# TestModelQuantMatchesCPU, TestModelMatchesCPU on gocoder-23m), then alone on the GPU: the B = 1
# decode step (int4 KV, int4 and int3 weights, 1K and 32K) with v4 and with
# BITDECODE_GEMVQ_V3=1 (v3.2) alternated twice, bench gemvq at T = 1 (int4, int8, int3; splits
# 1, 2, 4, 8: v2, v3.2 and v4 alternated at each), and ncu of v4 on int4 gate/up (its rule's
# split) if time is left.
# Run from the repo root with .gpu-gemvq3/ carried (bundle.tar.xz from build.sh run1.sh).
set -o pipefail
cd .gpu-gemvq3; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/run1.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test; cp commit $R/
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 60 ./$2 -test.v -test.timeout 60s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference)$'
tst backend backend.test '^(TestQuantLinear|TestModelQuantMatchesCPU|TestModelMatchesCPU)$'
wait; t tests; snap
run() { # name seconds env args...
  local n=$1 s=$2 e=$3; shift 3
  env $e timeout $s ./bitdecode "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
M="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_v4_$i 20 BITDECODE_GEMVQ_V3=0 $M --json $R/model_v4_$i.json
  run model_v32_$i 20 BITDECODE_GEMVQ_V3=1 $M --json $R/model_v32_$i.json
done
run gemvq_1 45 BITDECODE_GEMVQ_V3=0 bench gemvq --bits 4,8,3 --splits 1,2,4,8 --json $R/gemvq_1.json
if [ $SECONDS -lt 115 ]; then run gemvq_2 15 BITDECODE_GEMVQ_V3=0 bench gemvq --bits 4 --shapes gate/up,down --splits 1,2,4,8; fi
if [ $SECONDS -lt 130 ]; then
  timeout $((165 - SECONDS)) ncu --clock-control none -k 'regex:gemv_q4' -s 3 -c 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics 'sm__cycles_active.avg,smsp__inst_executed.sum,dram__bytes_read.sum' \
    -o $R/ncu_v4 ./bitdecode bench gemvq --bits 4 --shapes gate/up --splits 2 > $R/ncu_v4.log 2>&1; echo "rc=$?" >> $R/ncu_v4.log
  timeout 8 ncu -i $R/ncu_v4.ncu-rep --page details > $R/ncu_v4_details.txt 2>&1; rm -f $R/ncu_v4.ncu-rep
fi
t end; snap; rm -rf $R
