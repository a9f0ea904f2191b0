#!/bin/bash
# s12-dec call 1: DEC v8 (the split path) tested, the per-layer A/B against main's binary alternated,
# tune dec, the step, and the state experiment (the tuned row before/after k 64 in one process; k 64
# alone then a fresh process; SM clock/power sampled throughout).
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T12; cp $D/run1.sh $R/
T0=$(date +%s); END=$((T0 + 170))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
B=$D/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,4,16,64 --n-tb 8,32,64,128,256 --runs 20"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1; shift; timeout $(lim ${L:-100}) "$@" > $R/$n.log 2>&1; tl "$n rc=$?"; }
( t warm $B bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_main $OLD bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_model $OLD bench model $MOD --dec-k 0 --steps 1 ) &
( t kernels_n4096 $KT -test.v -test.run "${G}int4-resint4-N(4096-K4096|256|384)-" ) &
( t kernels_down $KT -test.v -test.run "${G}int4-resint4-N4096-K14336-" ) &
( t kernels_n1024_int3 $KT -test.v -test.run "${G}(int3-|int4-resint4-N1024-)" ) &
( t kernels_n14336 $KT -test.v -test.run "${G}int4-resint4-N14336-" ) &
( t kernels_protocol $KT -test.v -test.run '^(TestDECFusedProtocol|TestDECFusedLateWords)$' -test.count=2 ) &
( t backend $BT -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' ) &
wait; snap
for i in 1 2; do
  timeout $(lim 15) $B bench dec $DECA --json $R/bench_dec_v8_$i.json > $R/bench_dec_v8_$i.log 2>&1; tl "bench dec v8 $i rc=$?"
  timeout $(lim 15) $OLD bench dec $DECA --json $R/bench_dec_main_$i.json > $R/bench_dec_main_$i.log 2>&1; tl "bench dec main $i rc=$?"
done; snap
timeout $(lim 22) $B bench model $MOD --dec-k 0,tuned:5%,0,64,0,tuned:5% --dec-settings $D/T4 --json $R/model_v8_a.json > $R/model_v8_a.log 2>&1; tl "model v8 a rc=$?"; snap
timeout $(lim 14) $B bench model $MOD --dec-k 64 --json $R/model_v8_b1.json > $R/model_v8_b1.log 2>&1; tl "model v8 b1 rc=$?"
timeout $(lim 9) $B bench model $MOD --dec-k 0,tuned:5%,0 --dec-settings $D/T4 --json $R/model_v8_b2.json > $R/model_v8_b2.log 2>&1; tl "model v8 b2 rc=$?"; snap
timeout $(lim 14) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T12/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
timeout $(lim 18) $OLD bench model $MOD --dec-k 0,64,0,tuned:5% --dec-settings $D/T4 --json $R/model_main.json > $R/model_main.log 2>&1; tl "model main rc=$?"; snap
timeout $(lim 9) $B bench model $MOD --dec-k 0,tuned:5%,0 --dec-settings $R/T12 --json $R/model_v8_t12.json > $R/model_v8_t12.log 2>&1; tl "model v8 T12 rc=$?"
kill $SMI; tl end; snap
