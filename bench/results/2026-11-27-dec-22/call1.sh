#!/bin/bash
# dec-22 call 1 (session 22b): the selected rows over every warp (gemv_q6_dec's tail).
# Phase 1 (parallel, untimed): the DEC GPU tests (kernels, backend, gpukv) and NVRTC warm-ups
# of both bitdecode binaries and of the diag builds.
# Phase 2 (alone on the GPU, timed): bench dec --v6-diag (int4, six shapes, k 0/1/8/16/32/64,
# the default against sessions 18-22's DEC warp ("warp") and the other forms, one process);
# tune dec (new); the step base/new alternated at k 0 and k 64 (two pairs each).
# Usage (device): bash .gpu-dec/call1.sh  (bins.tar.xz beside it). Results in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call1.sh $R/
T0=$(date +%s); END=$((T0 + 290))
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
t gk_model 175 $B/gpukv.test -test.v -test.timeout 170s -test.run '^(TestGPUModelDECLists)$' &
t bt_q6 175 $B/backend.test -test.v -test.timeout 170s -test.run '^(TestQuantLinearQ6DEC|TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t kt_q6 175 $B/kernels.test -test.v -test.timeout 170s -test.run '^(TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ)$' &
for v in base new; do t warm_$v 170 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k 8 --steps 1 & done
t warm_diag 170 $B/bitdecode-new bench dec --v6-diag --weights int4 --shapes 1024x4096 --k-chunk 8 --runs 1
wait; tl "phase 2"; snap
t diag 45 $B/bitdecode-new bench dec --v6-diag --weights int4 --shapes $SH --k-chunk 1,8,16,32,64 --runs 30
snap
mkdir -p $R/tune22
t tune22 60 $B/bitdecode-new tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune22/bitdecode.json
snap
row() { # row K VARIANT REP [extra...]
  local k=$1 v=$2 rep=$3; shift 3; local n=$(echo $k | tr ':%' '__')
  t model_k${n}_${v}_$rep 25 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k $k "$@" --json $R/model_k${n}_${v}_$rep.json
}
for rep in 1 2; do row 64 base $rep; row 64 new $rep; row 0 base $rep; row 0 new $rep; snap; done
tl end; snap
