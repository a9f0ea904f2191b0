#!/bin/bash
# call1.sh (s15-gemvq2, call 1): tests of v5.2/v6.1 (the LEAN step) in parallel; then alone on
# the GPU: bench gemvq --diag (this branch: v5.1, loads, loads-tiled, v6, v5.2, v6.1 alternated at
# each point; main's: its four forms), bench gemvq --bits 4,8 main vs this branch (this branch's
# version 5 is v5.2, version 7 v5.1), the B = 1 step with int4 and int8 weights (main, this branch,
# alternated twice), ncu counts and stall reasons of the forms on gate/up S 2 and down S 8.
# Run from the repo root with .gpu-gemvq2/ carried (bundle.tar.xz from build.sh call1.sh).
set -o pipefail
cd .gpu-gemvq2; R=$OUT/r; mkdir -p $R; cp run.sh $R/call1.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-main *.test; cp commit $R/
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 170 ./$2 -test.v -test.timeout 165s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 kernels.test '^(TestGEMVQ52MatchesV51|TestGEMVQ6MatchesV5|TestPackTilesMatchesWQ)$'
tst kref kernels.test '^TestGEMVQMatchesReference$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestModelQuantMatchesCPU)$'
wait; t tests; snap
grep -hE "^(--- |ok|FAIL|PASS|rc=)" $R/k52.log $R/kref.log $R/backend.log
run() { # name seconds command args...
  local n=$1 s=$2; shift 2
  timeout $s "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run diag_new 120 ./bitdecode bench gemvq --diag --splits 2,8 --json $R/diag_new.json
run diag_main 90 ./bitdecode-main bench gemvq --diag --splits 2,8
run gemvq_main 60 ./bitdecode-main bench gemvq --bits 4,8 --shapes "gate/up,down,q/o proj"
run gemvq_new 60 ./bitdecode bench gemvq --bits 4,8 --shapes "gate/up,down,q/o proj"
M="bench model --ctx 1k,32k --kv int4 --weights int4,int8 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run model_main_$i 60 ./bitdecode-main $M --json $R/model_main_$i.json
  run model_new_$i 60 ./bitdecode $M --json $R/model_new_$i.json
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M2="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
timeout 60 $NCU --clock-control none -k regex:gemv_q5 --metrics "$M2" ./bitdecode bench gemvq --diag --diag-runs 1 --shapes gate/up,down --splits 2,8 > $R/ncu.log 2>&1; echo "rc=$?" >> $R/ncu.log; t ncu
t end; snap
grep -E "S=(2|8) x(1|4) " $R/diag_new.log | grep -E "gate/up |down " | grep -v "early=false.*x4" | cut -c12- | cut -c1-100
grep -E "int(4|8) .*(gate/up|down).*S=(2|8)" $R/gemvq_main.log $R/gemvq_new.log | grep -E "v(5|7) " | cut -c1-150
grep -hE "ms/step" $R/model_*.log
cat $R/times.txt
