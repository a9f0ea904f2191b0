#!/bin/bash
# s11-dec call 2: DEC v7 (the acquire claim alone) tested, then the per-layer A/B against main's binary
# (v6.1 kernels) alternated, tune dec, and the step with rows ordered to show what the row after k 64 pays.
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4; cp $D/run2.sh $R/
T0=$(date +%s); END=$((T0 + 172))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,64 --n-tb 8,32,64,128 --runs 20"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1; shift; timeout $(lim ${L:-95}) "$@" > $R/$n.log 2>&1; tl "$n rc=$?"; }
( t warm $B bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_main $OLD bench dec --shapes 1024x4096 --weights int4 $DECW ) &
( t warm_model $OLD bench model $MOD --dec-k 0 --steps 1 ) &
( t kernels_n4096 $KT -test.v -test.run "${G}-N(4096|1024|256|384)-" ) &
( t kernels_n14336 $KT -test.v -test.run "${G}N14336-K4096-" ) &
( t kernels_protocol $KT -test.v -test.run '^(TestDECFusedProtocol|TestDECFusedLateWords)$' -test.count=2 ) &
( t backend $BT -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' ) &
wait; snap
for i in 1 2; do
  timeout $(lim 12) $B bench dec $DECA --json $R/bench_dec_v7_$i.json > $R/bench_dec_v7_$i.log 2>&1; tl "bench dec v7 $i rc=$?"
  timeout $(lim 12) $OLD bench dec $DECA --json $R/bench_dec_main_$i.json > $R/bench_dec_main_$i.log 2>&1; tl "bench dec main $i rc=$?"
done; snap
timeout $(lim 20) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
timeout $(lim 30) $B bench model $MOD --dec-k 0,64,0,tuned:5%,tuned:10%,0,tuned:5% --dec-settings $R/T4 --json $R/model_v7.json > $R/model_v7.log 2>&1; tl "model v7 rc=$?"; snap
timeout $(lim 25) $OLD bench model $MOD --dec-k 0,64,0,tuned:5%,0,tuned:5% --dec-settings $D/T4 --json $R/model_main.json > $R/model_main.log 2>&1; tl "model main rc=$?"; snap
tl end; snap
