#!/bin/bash
# s12-dec call 2: the k/v split case alone (call 1 timed out on it), then the per-layer A/B against
# main's binary alternated, tune dec, the step, and the state experiment (the tuned row before/after
# k 64 in one process; k 64 alone then a fresh process; SM clock/power sampled throughout phase 2).
# If the k/v case does not pass, phase 2 runs b/bitdecode (the split path only for slices of >= 64 outputs).
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R/T12; cp $D/run2.sh $R/
T0=$(date +%s); END=$((T0 + 164))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; BB=$D/b/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,4,16,64 --n-tb 8,32,64,128,256 --runs 20"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
G='^TestGEMVQDECMatchesSerial$/'
t() { local n=$1; shift; timeout $(lim ${L:-58}) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
t warm $B bench dec --shapes 1024x4096 --weights int4 $DECW & P1=$!
t warm_b $BB bench dec --shapes 1024x4096 --weights int4 $DECW & P2=$!
t warm_main $OLD bench dec --shapes 1024x4096 --weights int4 $DECW & P3=$!
t warm_model $OLD bench model $MOD --dec-k 0 --steps 1 & P4=$!
t kernels_kv $KT -test.v -test.timeout 56s -test.run "${G}int4-resint4-N1024-" & P5=$!
t kernels_int3 $KT -test.v -test.timeout 56s -test.run "${G}int3-" & P6=$!
wait $P1 $P2 $P3 $P4 $P6; wait $P5; KV=$?
V=$B; VN=v8; if [ $KV -ne 0 ]; then V=$BB; VN=v8b; fi; tl "phase 2 with $VN (kernels_kv rc=$KV)"; snap
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
for i in 1 2; do
  timeout $(lim 15) $V bench dec $DECA --json $R/bench_dec_${VN}_$i.json > $R/bench_dec_${VN}_$i.log 2>&1; tl "bench dec $VN $i rc=$?"
  timeout $(lim 15) $OLD bench dec $DECA --json $R/bench_dec_main_$i.json > $R/bench_dec_main_$i.log 2>&1; tl "bench dec main $i rc=$?"
done; snap
timeout $(lim 22) $V bench model $MOD --dec-k 0,tuned:5%,0,64,0,tuned:5% --dec-settings $D/T4 --json $R/model_${VN}_a.json > $R/model_${VN}_a.log 2>&1; tl "model $VN a rc=$?"; snap
timeout $(lim 14) $V bench model $MOD --dec-k 64 --json $R/model_${VN}_b1.json > $R/model_${VN}_b1.log 2>&1; tl "model $VN b1 rc=$?"
timeout $(lim 9) $V bench model $MOD --dec-k 0,tuned:5%,0 --dec-settings $D/T4 --json $R/model_${VN}_b2.json > $R/model_${VN}_b2.log 2>&1; tl "model $VN b2 rc=$?"; snap
timeout $(lim 14) $V tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T12/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
timeout $(lim 18) $OLD bench model $MOD --dec-k 0,64,0,tuned:5% --dec-settings $D/T4 --json $R/model_main.json > $R/model_main.log 2>&1; tl "model main rc=$?"; snap
timeout $(lim 9) $V bench model $MOD --dec-k 0,tuned:5%,0 --dec-settings $R/T12 --json $R/model_${VN}_t12.json > $R/model_${VN}_t12.log 2>&1; tl "model $VN T12 rc=$?"
kill $SMI; tl end; snap
