#!/bin/bash
# Session 24 (gemvq), call 2: v6.1c (int3's codes in place in v6.1, LaunchTiled's int3 at splits 4-8) after
# v6.3 was dropped: TestGEMVQ52MatchesV51 and TestQuantLinearTiled, then the B = 1 8B step with int4 and int3
# weights (main, this branch alternated twice, then this branch with BITDECODE_GEMVQ_V61=1: main's v6.1), and
# bench gemvq --diag for int3 (v6.1, v6.2, v6.1c alternated at each point) on down, q/o, q|k|v.
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz: bitdecode = this branch, bitdecode-base =
# main d57e2de, kernels.test and backend.test = this branch's).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
tar xJf bundle.tar.xz && chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name seconds binary regexp
  (timeout $2 ./$3 -test.v -test.timeout ${2}s -test.run "$4" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst qlt 235 backend.test '^TestQuantLinearTiled$'
tst k52 200 kernels.test '^TestGEMVQ52MatchesV51$'
W1="bench model --ctx 1k --kv int4 --weights int4,int3 --batch 1 --steps 2 --no-linears"
(timeout 150 ./bitdecode $W1 > $R/warm_new.log 2>&1; timeout 100 ./bitdecode-base $W1 > $R/warm_base.log 2>&1;
 timeout 60 ./bitdecode bench gemvq --diag --diag-runs 1 --bits 3 --shapes down --splits 8 > $R/warm_diag.log 2>&1) &
wait; t tests; snap
grep -h -E '^(--- |ok|FAIL|PASS)|rc=|panic' $R/k52.log $R/qlt.log | grep -v '^    ---' | tail -20
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  run m_base_$i 25 bitdecode-base $W
  run m_new_$i 25 bitdecode $W
done
BITDECODE_GEMVQ_V61=1 run m_v61 25 bitdecode $W
run diag 40 bitdecode bench gemvq --diag --bits 3 --shapes "down,q/o,q|k|v" --splits 4,8 --json $R/diag.json
for f in m_base_1 m_new_1 m_base_2 m_new_2 m_v61; do echo "$f"; grep -h -E '^\| int' $R/$f.log | cut -d'|' -f2,5,8; done
grep -E 'x4 early=true' $R/diag.log
t end; snap; rm -rf $R
