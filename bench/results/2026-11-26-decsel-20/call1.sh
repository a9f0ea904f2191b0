#!/bin/bash
# decsel-20 call 1 (session 19b's decsel-19/call1.sh, run in session 20, plus main's MoE tests): DEC's list made by AddRMSNorm
# (add_rmsnorm_cluster_sel, BITDECODE_DEC_NORM_SELECT=1) instead of select_q6 launches.
# Phase 1: the GPU tests of the change (kernels, backend) beside the NVRTC warm-ups.
# Phase 2: the step A/B, one process a row, alternated: base = main's binary, off = the
# branch's binary with the option off (must equal base), on = the option on.
# Usage (device): bash .gpu-decsel/call1.sh   (bins.tar.xz beside it: bitdecode-base,
# bitdecode-new, kernels.test, backend.test, gpukv.test). Everything lands in $OUT/results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R/tune4; cp $D/call1.sh $R/
T0=$(date +%s); END=$((T0 + 500))
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
# phase 1: tests and warm-ups in parallel (each test process compiles its NVRTC programs: >= 150 s)
t kt_sel 200 $B/kernels.test -test.v -test.timeout 190s -test.run '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel|TestOpsAddRMSNorm|TestOpsHadamard)$' &
t kt_q6 200 $B/kernels.test -test.v -test.timeout 190s -test.run '^(TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ)$' &
t bt_sel 200 $B/backend.test -test.v -test.timeout 190s -test.run '^(TestQ6DECNormSelect|TestQueueAfterSel)$' &
t bt_sel2 200 $B/backend.test -test.v -test.timeout 190s -test.run '^(TestQ6DECOutSelect|TestQ6DECDownSelect)$' &
t bt_q6 200 $B/backend.test -test.v -test.timeout 190s -test.run '^(TestQuantLinearQ6DEC)$' &
t gk_sel 200 $B/gpukv.test -test.v -test.timeout 190s -test.run '^(TestGPUAttendDECList)$' &
# main's MoE tests through greedyGraphsSameBits (mended in session 19, never run on a GPU)
BITDECODE_DEC_RESIDUAL= t gk_moe 200 $B/gpukv.test -test.v -test.timeout 190s -test.run '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts)$' &
for v in base new; do for w in int4 int3; do
  t warm_${v}_$w 200 $B/bitdecode-$v bench model $MOD --weights $w --dec-k 8 --steps 1 &
done; done
wait; tl "phase 2"; snap
# phase 2: the step. k 0 once a variant (the option changes nothing without DEC), k 8 and 64 twice.
run() { # run NAME-SUFFIX WEIGHTS K VARIANT
  local w=$1 k=$2 v=$3 rep=$4 bin=$B/bitdecode-new sel=0
  [ $v = base ] && bin=$B/bitdecode-base
  [ $v = on ] && sel=1
  BITDECODE_DEC_NORM_SELECT=$sel t model_${w}_k${k}_${v}_$rep 40 $bin bench model $MOD --weights $w --dec-k $k --json $R/model_${w}_k${k}_${v}_$rep.json
}
for w in int4 int3; do for v in base off on; do run $w 0 $v 1; done; done; snap
for rep in 1 2; do for w in int4 int3; do for k in 8 64; do for v in base off on; do
  run $w $k $v $rep
done; done; done; snap; done
# phase 3 (what is left of the budget): tune dec with the lists made where x is produced
# (picks on the list-given step), then the tuned step with the option on.
BITDECODE_DEC_NORM_SELECT=1 t tune_int4 90 $B/bitdecode-new tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune4/bitdecode.json
snap
for k in tuned:5% tuned:10%; do n=$(echo $k | tr ':%' '__')
  BITDECODE_DEC_NORM_SELECT=1 t model_int4_${n}_on 40 $B/bitdecode-new bench model $MOD --weights int4 --dec-k $k --dec-settings $R/tune4 --json $R/model_int4_${n}_on.json
done
tl end; snap
