#!/bin/bash
# call2.sh (s15-gemvq, call 2): tests of v6/v6s and the tiled copies; then alone on the GPU:
# bench gemvq --diag (v5.1, loads, loads-tiled, v6 at splits 1-8, v6s; the defaults and the
# occupancy variant GEMVQ5_STAGES=2 GEMVQ5_MIN_BLOCKS=3; one launch and four back to back),
# bench gemvq --bits 4 main vs this branch, the B = 1 int4 step (main, this branch with
# BITDECODE_GEMVQ_TILED=1, with =1 and _PLAIN=1, twice each), ncu stall reasons of v5.1, v6, v6s.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz from build.sh call2.sh).
set -o pipefail
cd .gpu-gemvq; R=$OUT/r; mkdir -p $R; cp run.sh $R/call2.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 110 ./$2 -test.v -test.timeout 110s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVQMatchesReference/^int.-g(128|256)-T1-|TestGEMVQ6MatchesV5|TestGEMVQ6SMatchesReference|TestPackTilesMatchesWQ)$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestQuantLinearTiledV6S)$'
wait; t tests; snap
grep -E "^(--- |ok|FAIL|PASS|rc=)" $R/kernels.log $R/backend.log | grep -v "^.*:    ---" 
run() { # name seconds command args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run diag 90 ./bitdecode bench gemvq --diag --variants ';GEMVQ5_STAGES=2 GEMVQ5_MIN_BLOCKS=3' --json $R/diag.json
run gemvq_main 30 ./bitdecode-main bench gemvq --bits 4 --shapes "gate/up,down,q/o proj" --splits 2,8
run gemvq_new 30 ./bitdecode bench gemvq --bits 4 --shapes "gate/up,down,q/o proj" --splits 2,8
M="bench model --ctx 1k,32k --kv int4 --weights int4 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_main_$i 30 ./bitdecode-main $M --json $R/model_main_$i.json
  run model_tiled_$i 30 env BITDECODE_GEMVQ_TILED=1 ./bitdecode $M --json $R/model_tiled_$i.json
  run model_plain_$i 30 env BITDECODE_GEMVQ_TILED=1 BITDECODE_GEMVQ_TILED_PLAIN=1 ./bitdecode $M --json $R/model_plain_$i.json
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M2="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
timeout 60 $NCU --clock-control none -k regex:gemv_q --metrics "$M2" ./bitdecode bench gemvq --diag --diag-runs 1 --shapes gate/up,down --splits 2,8 > $R/ncu.log 2>&1; echo "rc=$?" >> $R/ncu.log; t ncu
t end; snap
grep -E "S=(2|8) x1 " $R/diag.log | grep -E "gate/up |down " | cut -c12- | cut -c1-95
grep -E "v6s" $R/diag.log | cut -c12- | cut -c1-95
grep -E "int4 .*(gate/up|down).*S=(2|8)" $R/gemvq_main.log $R/gemvq_new.log | grep -E "v5 " | cut -c1-140
grep -hE "ms/token|ms|tok" $R/model_*_1.log | head -20
cat $R/times.txt
