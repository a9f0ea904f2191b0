#!/bin/bash
# decsel-20 call 2: the lists made where x is produced as the default (branch s20-decsel at
# 870773b+dca0ec3; BITDECODE_NO_DEC_NORM_SELECT=1 turns them off), after call 1's one failure
# (TestQ6DECNormSelect's first run on a fresh backend: a buffer grown between the norm and its GEMV).
# Phase 1: the fixed backend test, the renamed option's tests, the new whole-model test, NVRTC warm-ups.
# Phase 2: off/on alternated at k 8 (int3 first: call 1's one row where on was slower), then
# int4 DEC off, k 4 on and tuned:5% on (call 1's tune file, carried as tune4/).
# Usage (device): bash .gpu-decsel/call2.sh (bins.tar.xz beside it: bitdecode-new, backend.test,
# gpukv.test). Everything lands in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call2.sh $R/
T0=$(date +%s); END=$((T0 + 270))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*
tl "unpacked"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
export BITDECODE_DEC_RESIDUAL=device
t bt_sel 170 $B/backend.test -test.v -test.timeout 165s -test.run '^(TestQ6DECNormSelect|TestQueueAfterSel)$' &
t bt_sel2 170 $B/backend.test -test.v -test.timeout 165s -test.run '^(TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t gk_sel 170 $B/gpukv.test -test.v -test.timeout 165s -test.run '^(TestGPUAttendDECList|TestGPUModelDECLists)$' &
for w in int4 int3; do t warm_$w 170 $B/bitdecode-new bench model $MOD --weights $w --dec-k 8 --steps 1 & done
wait; tl "phase 2"; snap
row() { # row WEIGHTS K VARIANT REP: off = BITDECODE_NO_DEC_NORM_SELECT=1, on = the default
  local w=$1 k=$2 v=$3 rep=$4 no=
  [ $v = off ] && no=1
  BITDECODE_NO_DEC_NORM_SELECT=$no t model_${w}_k${k}_${v}_$rep 30 $B/bitdecode-new bench model $MOD --weights $w --dec-k $k --json $R/model_${w}_k${k}_${v}_$rep.json
}
for rep in 1 2; do for w in int3 int4; do for v in off on; do row $w 8 $v $rep; done; done; snap; done
row int4 0 on 1
row int4 4 on 1
t model_int4_tuned_5_on 30 $B/bitdecode-new bench model $MOD --weights int4 --dec-k tuned:5% --dec-settings $D/tune4 --json $R/model_int4_tuned_5_on.json
tl end; snap
