#!/bin/bash
# Session 23 (gemvq), call 2: tests of v6.2 and its route on the H100, then bench gemvq (this branch: v8 = v6.1,
# v9 = v6.2 alternated at each split; main's binary: v8 = v6.1), the B = 1 8B step with int4 and int3 weights
# (main, this branch alternated three times, then this branch with BITDECODE_GEMVQ_V61=1), and bench gemvq
# --diag for int4, int8, int3 with v6.2's deepest ring 4 (default) and 5 (GEMVQ7_DEEP=5).
# Run from the repo root with .gpu-gemvq/ carried (bundle.tar.xz: bitdecode = this branch, bitdecode-base =
# main d56ce9d, kernels.test and backend.test = this branch's).
set -o pipefail
cd .gpu-gemvq; G=$PWD; R=$OUT/r; mkdir -p $R; cp call2.sh $R/ 2>/dev/null
tar xJf bundle.tar.xz && chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 170 ./$2 -test.v -test.timeout 170s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 kernels.test '^TestGEMVQ52MatchesV51$'
tst kref kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ6MatchesV5|TestGEMVQ6DECMatchesV61)$'
tst ktiled kernels.test '^TestGEMVQTiledMatchesWQ$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestJoinTiled|TestJoinTiledSwiGLU|TestJoinTiledKnobs|TestQuantLinearQ6DEC|TestLinearGraphReplay|TestModelQuantMatchesCPU)$'
W1="bench model --ctx 1k --kv int4 --weights int4,int3 --batch 1 --steps 2 --no-linears"
(timeout 170 ./bitdecode $W1 > $R/warm_new.log 2>&1; timeout 100 ./bitdecode-base $W1 > $R/warm_base.log 2>&1;
 timeout 100 ./bitdecode bench gemvq --diag --diag-runs 1 --bits 4,8,3 --shapes gate/up --splits 2 --variants ";GEMVQ7_DEEP=5" > $R/warm_diag.log 2>&1) &
wait; t tests; snap
grep -h -E '^(--- |ok|FAIL|PASS)|rc=' $R/k52.log $R/kref.log $R/ktiled.log $R/backend.log | grep -v '^    ---' | tail -40
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
S="--bits 4,3 --shapes q/o proj,gate/up,down --splits 2,8"
run gq_new 60 bitdecode bench gemvq --bits 4,3 --shapes "q/o proj,gate/up,down" --splits 2,8 --json $R/gq_new.json
run gq_base 60 bitdecode-base bench gemvq --bits 4,3 --shapes "q/o proj,gate/up,down" --splits 2,8 --json $R/gq_base.json
W="bench model --ctx 1k,32k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
for i in 1 2 3; do
  run m_base_$i 40 bitdecode-base $W
  run m_new_$i 40 bitdecode $W
done
BITDECODE_GEMVQ_V61=1 run m_v61 40 bitdecode $W
run diag 90 bitdecode bench gemvq --diag --bits 4,8,3 --shapes gate/up,down --splits 2,8 --variants ";GEMVQ7_DEEP=5" --json $R/diag.json
grep -h -E 'v(8|9) .*(gate/up|down|q/o)' $R/gq_new.log | grep -E 'S=(2|8) '
grep -h -E 'v8 .*(gate/up|down|q/o)' $R/gq_base.log | grep -E 'S=(2|8) '
grep -h -E '^\| int' $R/m_*.log
grep -E 'gemvq diag (v6.1|v6.2|loads-tiled) ' $R/diag.log | grep 'x4 early=true'
t end; snap; rm -rf $R
