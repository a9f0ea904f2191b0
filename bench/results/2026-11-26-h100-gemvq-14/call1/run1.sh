#!/bin/bash
# run1.sh (s13-gemvq2, call 1): the landscape and the profile. Alone on the GPU first: bench gemvq
# at T = 1 over int4/int8/int3, splits 1, 2, 4, v2, v3.1 and v3.2 (rings of 2, 3, 4 slots)
# alternated per split. Then TestGEMVQMatchesReference (v3.2 included) beside ncu of v3.1 at
# gemvq3SplitFor's split on int4 gate/up (S 2), int4 down (S 4), int8 gate/up (S 1), and v3.2
# (ring 3, S 2) on int4 gate/up: the 4th timed launch of each.
# Run from the repo root with .gpu-gemvq2/ carried (bundle.tar.xz from build.sh run1.sh).
set -o pipefail
cd .gpu-gemvq2; R=$OUT/r; mkdir -p $R; cp run.sh $R/run1.sh
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" t=$SECONDS $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
timeout 60 ./bitdecode bench gemvq --bits 4,8,3 --splits 1,2,4 --json $R/sweep.json > $R/sweep.log 2>&1; echo "rc=$?" >> $R/sweep.log
t sweep; snap
(timeout 70 ./kernels.test -test.v -test.timeout 70s -test.run '^TestGEMVQMatchesReference$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
prof() { # name kernel-regex skip bench-args...
  local n=$1 k=$2 s=$3; shift 3
  if [ $SECONDS -gt 140 ]; then echo "skip $n t=$SECONDS" >> $R/times.txt; return; fi
  timeout $((165 - SECONDS)) ncu --clock-control none -k "regex:$k" -s $s -c 1 --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics 'sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,smsp__inst_executed.sum,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__warps_launched.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    -o $R/$n ./bitdecode bench gemvq "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log
  timeout 10 ncu -i $R/$n.ncu-rep --page details --print-details all > $R/${n}_details.txt 2>&1
  rm -f $R/$n.ncu-rep; t $n; snap
}
prof ncu_v31_i4_gateup 'gemv_q3([^p]|$)' 3 --bits 4 --shapes gate/up --splits 2
prof ncu_v32_i4_gateup 'gemv_q3p' 26 --bits 4 --shapes gate/up --splits 2
prof ncu_v31_i4_down 'gemv_q3([^p]|$)' 3 --bits 4 --shapes down --splits 4
prof ncu_v31_i8_gateup 'gemv_q3([^p]|$)' 3 --bits 8 --shapes gate/up --splits 1
wait; t end; snap; rm -rf $R
