#!/bin/bash
# Session 24 (gemvq), call 1: tests of v6.3 / v6.1c on the H100 (kernels: TestGEMVQ52MatchesV51 and the
# reference tests; backend: TestQuantLinearTiled, TestJoinTiled, TestTiledLayoutRouting), then bench gemvq
# --diag (this branch: v6.1, v6.2, v6.3, v6.1c alternated at each point; main's binary: v6.1, v6.2 on down),
# and the B = 1 8B step with int4 and int3 weights (main, this branch alternated twice).
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz: bitdecode = this branch, bitdecode-base =
# main d57e2de, kernels.test and backend.test = this branch's).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
tar xJf bundle.tar.xz && chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name seconds binary regexp
  (timeout $2 ./$3 -test.v -test.timeout ${2}s -test.run "$4" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 200 kernels.test '^TestGEMVQ52MatchesV51$'
tst kref 170 kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ6MatchesV5|TestGEMVQ6DECMatchesV61)$'
tst qlt 200 backend.test '^TestQuantLinearTiled$'
tst join 170 backend.test '^(TestJoinTiled|TestTiledLayoutRouting|TestQuantLinear)$'
W1="bench model --ctx 1k --kv int4 --weights int4,int3 --batch 1 --steps 2 --no-linears"
(timeout 150 ./bitdecode $W1 > $R/warm_new.log 2>&1; timeout 100 ./bitdecode-base $W1 > $R/warm_base.log 2>&1) &
(timeout 150 ./bitdecode bench gemvq --diag --diag-runs 1 --bits 4,3 --shapes "down,q/o,q|k|v" --splits 8 > $R/warm_diag.log 2>&1;
 timeout 60 ./bitdecode-base bench gemvq --diag --diag-runs 1 --bits 4,3 --shapes down --splits 8 > $R/warm_diagb.log 2>&1) &
wait; t tests; snap
grep -h -E '^(--- |ok|FAIL|PASS)|rc=|panic' $R/k52.log $R/kref.log $R/qlt.log $R/join.log | grep -v '^    ---' | tail -30
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run diag_new 70 bitdecode bench gemvq --diag --bits 4,3 --shapes "down,q/o,q|k|v" --splits 4,8 --json $R/diag_new.json
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run m_base_$i 30 bitdecode-base $W
  run m_new_$i 30 bitdecode $W
done
run diag_base 40 bitdecode-base bench gemvq --diag --bits 4,3 --shapes down --splits 8 --json $R/diag_base.json
grep -E 'gemvq diag (v6.1|v6.2|v6.3|v6.1c|loads-tiled) ' $R/diag_new.log | grep -E 'x4 early=true|x1' | grep -v 'v6.2 .*S=4'
grep -E 'gemvq diag (v6.1|v6.2) ' $R/diag_base.log | grep 'x4 early=true'
grep -h -E '^\| int' $R/m_*.log
run diag_new2 40 bitdecode bench gemvq --diag --bits 4,3 --shapes down --splits 8
t end; snap; rm -rf $R
