#!/bin/bash
# dec-22 call 2 (session 22b, round 2): the tail as a second form (a lane a row, one load a
# slice), picked by the list's length (k_chunk >= 20 the tail).
# Phase 1 (parallel, untimed): the DEC GPU tests and NVRTC warm-ups.
# Phase 2 (alone, timed): bench dec --v6-diag (int4, six shapes, k 0/1/8/16/32/64: auto, warp
# (main's kernel), tail, each alone, pair); bench dec --v6 (new, the auto form's table with the
# selection); tune dec (new); the step base/new alternated: k 64 (two pairs), k 32, tuned:5%
# (new's tune file on both binaries, two pairs), k 0.
# Usage (device): bash .gpu-dec/call2.sh  (bins.tar.xz beside it). Results in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call2.sh $R/
T0=$(date +%s); END=$((T0 + 292))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
SH="4096x4096,1024x4096,14336x4096,4096x14336,6144x4096,28672x4096"
t gk_model 165 $B/gpukv.test -test.v -test.timeout 160s -test.run '^(TestGPUModelDECLists)$' &
t bt_q6 165 $B/backend.test -test.v -test.timeout 160s -test.run '^(TestQuantLinearQ6DEC|TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t kt_q6 165 $B/kernels.test -test.v -test.timeout 160s -test.run '^(TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ)$' &
for v in base new; do t warm_$v 160 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k 64 --steps 1 & done
t warm_diag 160 $B/bitdecode-new bench dec --v6-diag --weights int4 --shapes 1024x4096 --k-chunk 8 --runs 1
wait; tl "phase 2"; snap
t diag 40 $B/bitdecode-new bench dec --v6-diag --weights int4 --shapes $SH --k-chunk 1,8,16,32,64 --runs 30
snap
mkdir -p $R/tune22
t tune22 45 $B/bitdecode-new tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune22/bitdecode.json
snap
row() { # row K VARIANT REP [extra...]
  local k=$1 v=$2 rep=$3; shift 3; local n=$(echo $k | tr ':%' '__')
  t model_k${n}_${v}_$rep 20 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k $k "$@" --json $R/model_k${n}_${v}_$rep.json
}
for rep in 1 2; do row 64 base $rep; row 64 new $rep; snap; done
row tuned:5% base 1 --dec-settings $R/tune22; row tuned:5% new 1 --dec-settings $R/tune22; snap
row 32 base 1; row 32 new 1; snap
row 0 base 1; row 0 new 1; snap
row tuned:5% base 2 --dec-settings $R/tune22; row tuned:5% new 2 --dec-settings $R/tune22; snap
row 64 base 3; row 64 new 3
tl end; snap
