#!/bin/bash
# session 26 lead: skinny.cu v3 with every split summing a slice (v40c); the steps with on, off and auto -- tests, bench gemv at 55/100 rows, then the
# max-batch steps with BITDECODE_SKINNY=auto (v3 where faster than cuBLASLt) against off.
D=$(cd "$(dirname "$0")" && pwd); B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
R=/tmp/r5; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 560))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r5 && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
ROOT=$(pwd)
(cd $ROOT/gpu/kernels && timeout $(lim 150) $B/kernels.test -test.v -test.timeout 145s -test.run '^(TestSkinnyMatchesReference|TestSkinnySplitAndRefusals)$' > $R/kern.log 2>&1; echo "rc=$?" >> $R/kern.log; tl "kern done")
grep -E "^(--- |ok|FAIL|rc=)|^    --- FAIL|skinny_test" $R/kern.log | head -20 | tee -a $R/timeline.txt; snap
if grep -q "^--- PASS: TestSkinnyMatchesReference" $R/kern.log; then
  (cd $ROOT/backend/gpu && timeout $(lim 120) $B/gpu.test -test.v -test.timeout 115s -test.run '^(TestLinearGraphReplay|TestJoinWeights|TestLinearGroup|TestFoldSwiGLUJoined|TestEnqueueOutHalf)$' > $R/back.log 2>&1; echo "rc=$?" >> $R/back.log; tl "back done") &
  wait
  for f in $R/back.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done | tee -a $R/timeline.txt; snap
fi
timeout $(lim 150) $B/bitdecode bench gemv --rows 55,100 > $R/gemv.log 2>&1; tl "gemv rc=$?"
grep -E "^linear|gemm alone" $R/gemv.log | tee -a $R/timeline.txt; snap
if grep -q "^--- PASS: TestSkinnyMatchesReference" $R/kern.log; then
  for k in 1 2; do
    for m in on off auto; do
      left=$((END - $(date +%s))); [ $left -lt 40 ] && break 2
      BITDECODE_SKINNY=$m timeout $(lim 90) $B/bitdecode bench model --ctx 32k --kv int4,int2 --batch max --steps 16 --no-linears > $R/max_${m}_$k.log 2>&1
      tl "max $m $k: $(grep -E 'ctx .* B .* TP' $R/max_${m}_$k.log | awk '{printf "%s B%s=%s (%s %s) ", $2, $6, $9, $10, $NF}')"; snap
    done
  done
fi
tl end; snap
