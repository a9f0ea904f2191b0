#!/bin/bash
# Session 23 (gemvq), call 1: v6.2 (gemv_q7) against v6.1 on the H100.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz: bitdecode = this branch, bitdecode-base =
# main d56ce9d, kernels.test = this branch's gpu/kernels tests).
# 1. In parallel: the bit-for-bit tests (TestGEMVQ52MatchesV51 with v6.2, TestGEMVQ6DECMatchesV61: gemv_q6_dec
#    against LaunchV6, now v6.2) and the kernel-cache warm-up of the benches (discarded runs).
# 2. bench gemvq --diag --bits 4,3 (alone x1, back to back x4 with and without early loads).
# 3. ncu (one launch each, --clock-control none): int4 and int3 gate/up S 2, every diag form; then PM sampling
#    of v6.1 and v6.2 (DRAM throughput over the kernel's life), exported.
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/ 2>/dev/null
tar xJf bundle.tar.xz && chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU" >> $R/times.txt
tst() { # name seconds regexp
  (timeout $2 ./kernels.test -test.v -test.timeout ${2}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 170 '^TestGEMVQ52MatchesV51$'
tst kdec 170 '^TestGEMVQ6DECMatchesV61$'
(timeout 170 ./bitdecode bench gemvq --diag --diag-runs 1 --bits 4,3 --shapes gate/up --splits 2 > $R/warm_diag.log 2>&1) &
wait; t tests; snap
grep -h -- '--- \|^ok\|^FAIL\|rc=' $R/k52.log $R/kdec.log | tail -60
timeout 100 ./bitdecode bench gemvq --diag --bits 4,3 --shapes gate/up,down --splits 2,8 --json $R/diag.json > $R/diag.log 2>&1; echo "rc=$?" >> $R/diag.log; t diag; snap
NC="--clock-control none -k regex:gemv_q --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats"
for b in 4 3; do
  timeout 60 $NCU $NC ./bitdecode bench gemvq --diag --diag-runs 1 --bits $b --shapes gate/up --splits 2 > $R/ncu$b.log 2>&1; echo "rc=$?" >> $R/ncu$b.log; t ncu$b; snap
done
timeout 40 $NCU --clock-control none --kernel-name-base mangled -k regex:'gemv_q7ILi4ELi2|gemv_q5ILi4ELi2ELb1ELb1ELb0ELb1' --section PmSampling -o $R/pm --force-overwrite ./bitdecode bench gemvq --diag --diag-runs 1 --bits 4 --shapes gate/up --splits 2 > $R/pm.log 2>&1; echo "rc=$?" >> $R/pm.log
timeout 20 $NCU -i $R/pm.ncu-rep --page details --print-details all > $R/pm_details.log 2>&1
timeout 20 $NCU -i $R/pm.ncu-rep --page raw --csv > $R/pm_raw.csv 2>&1; t pm; snap
grep -E 'gemvq diag (v6.1|v6.2|loads-tiled) ' $R/diag.log
t end; snap; rm -rf $R
