#!/bin/bash
# decrank-20 call 1 (session 20b): DEC's ranking in the list producers with one CTA barrier.
# Phase 1: the GPU tests of the change (kernels, backend, gpukv) beside NVRTC warm-ups of every binary.
# Phase 2: BenchmarkOpsSel, base and new alternated (the producers against the kernels they replace).
# Phase 3: the step A/B, base = main 3536c42, new = s20-decrank, one process a row, alternated:
# bench model --ctx 1k --kv int4 --no-linears --steps 16, residuals on the device, k 8 / tuned:5% /
# tuned:10% (session 20's tune file, tune4/) / 64 / 4 / 0.
# Usage (device): bash .gpu-decrank/call1.sh   (bins/ beside it). Everything lands in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call1.sh $R/
T0=$(date +%s); END=$((T0 + 282))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
export BITDECODE_DEC_RESIDUAL=device
t kt_sel 160 $B/kernels.test -test.v -test.timeout 155s -test.run '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel)$' &
t bt_sel 160 $B/backend.test -test.v -test.timeout 155s -test.run '^(TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t gk_model 160 $B/gpukv.test -test.v -test.timeout 155s -test.run '^(TestGPUModelDECLists)$' &
t kb_warm_base 160 $B/kernels-base.test -test.run '^$' -test.bench OpsSel -test.benchtime 1x &
for v in base new; do t warm_$v 160 $B/bitdecode-$v bench model $MOD --weights int4 --dec-k 8 --steps 1 & done
wait; tl "phase 2"; snap
for rep in 1 2; do for v in base new; do
  kt=$B/kernels.test; [ $v = base ] && kt=$B/kernels-base.test
  t kb_${v}_$rep 30 $kt -test.run '^$' -test.bench OpsSel -test.benchtime 500x -test.count 2
done; done; snap
row() { # row WEIGHTS K VARIANT REP [extra...]
  local w=$1 k=$2 v=$3 rep=$4; shift 4; local n=$(echo $k | tr ':%' '__')
  t model_${w}_k${n}_${v}_$rep 25 $B/bitdecode-$v bench model $MOD --weights $w --dec-k $k "$@" --json $R/model_${w}_k${n}_${v}_$rep.json
}
for v in base new; do row int4 8 $v 1; done
for v in base new; do row int4 tuned:5% $v 1 --dec-settings $D/tune4; done; snap
for v in base new; do row int3 8 $v 1; done
for v in base new; do row int4 64 $v 1; done; snap
for v in base new; do row int4 8 $v 2; done
for v in base new; do row int4 tuned:10% $v 1 --dec-settings $D/tune4; done; snap
for v in base new; do row int4 4 $v 1; done
for v in base new; do row int4 0 $v 1; done
for v in base new; do row int4 tuned:5% $v 2 --dec-settings $D/tune4; done; snap
for v in base new; do row int3 64 $v 1; done
for v in base new; do row int3 8 $v 2; done
tl end; snap
