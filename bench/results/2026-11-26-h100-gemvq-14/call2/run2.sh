#!/bin/bash
# run2.sh (s13-gemvq2, call 2): v3.2 against main's binary (bitdecode-main, /work/main's HEAD:
# v3.1). The GPU tests first (gpu/kernels' TestGEMVQMatchesReference beside backend/gpu's
# TestQuantLinear, TestModelQuantMatchesCPU, TestModelMatchesCPU on gocoder-23m), then alone on
# the GPU: the B = 1 decode step (int4 KV, int4 and int3 weights, 1K and 32K) alternated
# this / main twice, bench gemvq at T = 1 (int4, int8, int3; splits 1, 2, 4) this / main, a
# second round on int4 gate/up and down, and ncu of v3.2 on int4 gate/up (S 4) if time is left.
# Run from the repo root with .gpu-gemvq2/ carried (bundle.tar.xz from build.sh run2.sh).
set -o pipefail
cd .gpu-gemvq2; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/run2.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp main.commit $R/
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 50 ./$2 -test.v -test.timeout 50s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference)$'
tst backend backend.test '^(TestQuantLinear|TestModelQuantMatchesCPU|TestModelMatchesCPU)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
M="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_v32_$i 20 bitdecode $M --json $R/model_v32_$i.json
  run model_main_$i 20 bitdecode-main $M --json $R/model_main_$i.json
done
Q="bench gemvq --bits 4,8,3 --splits 1,2,4"
run gemvq_v32_1 35 bitdecode $Q --json $R/gemvq_v32_1.json
run gemvq_main_1 35 bitdecode-main $Q --json $R/gemvq_main_1.json
Q2="bench gemvq --bits 4 --shapes gate/up,down --splits 1,2,4"
if [ $SECONDS -lt 100 ]; then run gemvq_v32_2 15 bitdecode $Q2; run gemvq_main_2 15 bitdecode-main $Q2; fi
if [ $SECONDS -lt 110 ]; then
  timeout $((125 - SECONDS)) ncu --clock-control none -k 'regex:gemv_q3' -s 3 -c 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics 'sm__cycles_active.avg,smsp__inst_executed.sum,dram__bytes_read.sum' \
    -o $R/ncu_v32 ./bitdecode bench gemvq --bits 4 --shapes gate/up --splits 4 > $R/ncu_v32.log 2>&1; echo "rc=$?" >> $R/ncu_v32.log
  timeout 8 ncu -i $R/ncu_v32.ncu-rep --page details > $R/ncu_v32_details.txt 2>&1; rm -f $R/ncu_v32.ncu-rep
fi
t end; snap; rm -rf $R
