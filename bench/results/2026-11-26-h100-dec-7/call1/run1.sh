#!/bin/bash
# s11-dec call 1: where the in-step DEC cost comes from (main's binary, v6.1), and v7 (acquire claim,
# binary-search selection) checked and timed in the step beside it.
# Phase 1 (parallel): warm-ups (CUBIN cache) and v7's DEC tests. Phase 2 (alone on the GPU): timings.
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R; cp $D/run1.sh $R/
T0=$(date +%s); END=$((T0 + 165))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1; shift; timeout $(lim ${L:-100}) "$@" > $R/$n.log 2>&1; tl "$n rc=$?"; }
( t warm $B bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_main $OLD bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_model $OLD bench model $MOD --dec-k 0 --steps 1 ) &
( t kernels_n4096 $KT -test.v -test.run "${G}-N4096-" ) &
( t kernels_n14336_t1 $KT -test.v -test.run "${G}N14336-K4096-T1" ) &
( t kernels_n14336_t23 $KT -test.v -test.run "${G}N14336-K4096-T[23]" ) &
( t kernels_small $KT -test.v -test.run "${G}-N(1024|256|384)-" ) &
( t kernels_protocol $KT -test.v -test.run '^(TestDECFusedProtocol|TestDECFusedLateWords)$' -test.count=2 ) &
( t backend $BT -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' ) &
wait; snap
# Phase 2, one at a time.
timeout $(lim 20) $OLD bench model $MOD --steps 16 --dec-k 0,tuned:5%,0 --dec-settings $D/T4 --json $R/model_main.json > $R/model_main.log 2>&1; tl "model main rc=$?"
timeout $(lim 20) $B bench model $MOD --steps 16 --dec-k 0,tuned:5%,0 --dec-settings $D/T4 --json $R/model_v7.json > $R/model_v7.log 2>&1; tl "model v7 rc=$?"; snap
BITDECODE_NO_PDL=1 timeout $(lim 15) $OLD bench model $MOD --steps 16 --dec-k 0,tuned:5% --dec-settings $D/T4 > $R/model_main_nopdl.log 2>&1; tl "model main nopdl rc=$?"
NA="--shapes 4096x14336,4096x4096 --weights int4 --mode fused --residual-at device --k-chunk 4,64 --n-tb 8,64 --runs 10"
timeout $(lim 8) $OLD bench dec $NA --activations narrow --json $R/dec_narrow_main.json > $R/dec_narrow_main.log 2>&1; tl "dec narrow main rc=$?"
timeout $(lim 8) $B bench dec $NA --activations narrow --json $R/dec_narrow_v7.json > $R/dec_narrow_v7.log 2>&1; tl "dec narrow v7 rc=$?"
timeout $(lim 8) $OLD bench dec $NA --json $R/dec_out_main.json > $R/dec_out_main.log 2>&1; tl "dec outliers main rc=$?"
timeout $(lim 8) $B bench dec $NA --json $R/dec_out_v7.json > $R/dec_out_v7.log 2>&1; tl "dec outliers v7 rc=$?"; snap
timeout $(lim 30) ncu --graph-profiling node --cache-control none --clock-control none -k regex:gemv_q \
  --metrics gpu__time_duration.sum,launch__grid_size,launch__waves_per_multiprocessor,launch__registers_per_thread,launch__occupancy_limit_registers \
  --csv $OLD bench model $MOD --steps 1 --dec-k 0,tuned:5% --dec-settings $D/T4 > $R/ncu_model_main.csv 2> $R/ncu_model_main.err; tl "ncu model main rc=$?"
tl end; snap
