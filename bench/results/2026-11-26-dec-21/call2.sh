#!/bin/bash
# dec-21 call 2 (session 21): the shorter ranking and tune dec's list charge.
# Background from t=0: backend and gpukv GPU tests of the lists; NVRTC warm-ups of both bitdecode binaries.
# Foreground: kernels' list tests; BenchmarkOpsSel base (main 5c86472) / new alternated twice;
# BenchmarkOpsSelDiag (default and SEL_V20B=1 in one process) twice.
# Then: tune dec (new: lists charged), the tuned:5% step against DEC off alternated (3 pairs),
# k 8 everywhere base/new (2 pairs), k 64 (new, base), session 20's tune file on the new binary.
# Usage (device): bash .gpu-dec/call2.sh  (bins.tar.xz, tune20/ beside it). Results in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call2.sh $R/
T0=$(date +%s); END=$((T0 + 287))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
t bt_sel 200 $B/backend.test -test.v -test.timeout 195s -test.run '^(TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t gk_model 200 $B/gpukv.test -test.v -test.timeout 195s -test.run '^(TestGPUModelDECLists)$' &
for v in base new; do t warm_$v 170 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k 8 --steps 1 & done
t kt_sel 90 $B/kernels.test -test.v -test.timeout 85s -test.run '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel)$'
for rep in 1 2; do for v in base new; do
  kt=$B/kernels.test; [ $v = base ] && kt=$B/kernels-base.test
  t kb_${v}_$rep 40 $kt -test.run '^$' -test.bench '^BenchmarkOpsSel$' -test.benchtime 500x -test.count 2
done; done
for rep in 1 2; do t kd_$rep 60 $B/kernels.test -test.run '^$' -test.bench OpsSelDiag -test.benchtime 500x -test.count 2; done
snap; wait; tl "phase 2"; snap
mkdir -p $R/tune21
t tune21 100 $B/bitdecode-new tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune21/bitdecode.json
snap
row() { # row WEIGHTS K VARIANT REP [extra...]
  local w=$1 k=$2 v=$3 rep=$4; shift 4; local n=$(echo $k | tr ':%' '__')
  t model_${w}_k${n}_${v}_$rep 25 $B/bitdecode-$v bench model $MOD --weights $w --dec-k $k "$@" --json $R/model_${w}_k${n}_${v}_$rep.json
}
for rep in 1 2 3; do row int4 0 new $rep; row int4 tuned:5% new $rep --dec-settings $R/tune21; done; snap
for v in base new; do row int4 8 $v 1; done; snap
for v in new base; do row int4 64 $v 1; done; snap
for v in base new; do row int4 8 $v 2; done; snap
row int4 tuned:5% new s20 --dec-settings $D/tune20
row int4 0 new 4
tl end; snap
