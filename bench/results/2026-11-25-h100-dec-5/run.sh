#!/bin/bash
# s9-dec call 1: DEC v6 (the one-trip protocol, eight rows in flight) against main's binary
# (b76b90f, v5) on the same machine. Phase 1: the CUBIN cache fills (both binaries' modules, int3
# and int4, the model's). Phase 2, timings alone on the GPU, alternated: bench dec v6 / v5 / v6 /
# v5, tune dec (v6), bench model v6 / v5 / v6 / v5. Phase 3: the DEC tests (four processes for
# TestGEMVQDECMatchesSerial's cases), memcheck and racecheck. Logs under $OUT/r, results.tgz.
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4; cp $D/run.sh $R/
T0=$(date +%s); END=$((T0 + 288))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; OLD=$D/bitdecode-main; KT=$D/kernels.test; BT=$D/backend.test
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,64 --n-tb 8,32,64,128 --runs 20"
MOD="--ctx 1k --kv int4 --weights int4 --no-linears --steps 16"
tl start
# Phase 1: compiles.
( timeout $(lim 100) $B bench dec --shapes 1024x4096 --weights int4 $DECW > $R/warm.log 2>&1; tl "warm v6 int4 rc=$?" ) &
( timeout $(lim 100) $B bench dec --shapes 1024x4096 --weights int3 $DECW > $R/warm3.log 2>&1; tl "warm v6 int3 rc=$?" ) &
( timeout $(lim 100) $OLD bench dec --shapes 1024x4096 --weights int4 $DECW > $R/warm_main.log 2>&1; tl "warm main rc=$?" ) &
( timeout $(lim 100) $B bench model $MOD --dec-k 0 --steps 1 > $R/warm_model.log 2>&1; tl "warm model rc=$?" ) &
wait; snap
# Phase 2: timings, one at a time.
for i in 1 2; do
  timeout $(lim 40) $B bench dec $DECA --json $R/bench_dec_v6_$i.json > $R/bench_dec_v6_$i.log 2>&1; tl "bench dec v6 $i rc=$?"
  timeout $(lim 40) $OLD bench dec $DECA --json $R/bench_dec_main_$i.json > $R/bench_dec_main_$i.log 2>&1; tl "bench dec main $i rc=$?"
  snap
done
timeout $(lim 30) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
for i in 1 2; do
  timeout $(lim 45) $B bench model $MOD --dec-k 0,64,tuned:5%,tuned:10%,0 --dec-settings $R/T4 --json $R/model_v6_$i.json > $R/model_v6_$i.log 2>&1; tl "model v6 $i rc=$?"
  timeout $(lim 30) $OLD bench model $MOD --dec-k 0,64,0 --json $R/model_main_$i.json > $R/model_main_$i.log 2>&1; tl "model main $i rc=$?"
  snap
done
# Phase 3: tests.
G='^TestGEMVQDECMatchesSerial$/'
( timeout $(lim 200) $KT -test.v -test.run '^TestDECFusedProtocol$' > $R/kernels_protocol.log 2>&1; tl "kernels protocol rc=$?" ) &
( timeout $(lim 200) $KT -test.v -test.run "${G}N14336-K4096-T1" > $R/kernels_gemvq_a.log 2>&1; tl "kernels gemvq a rc=$?" ) &
( timeout $(lim 200) $KT -test.v -test.run "${G}N14336-K4096-T[23]" > $R/kernels_gemvq_b.log 2>&1; tl "kernels gemvq b rc=$?" ) &
( timeout $(lim 200) $KT -test.v -test.run "${G}-N4096-" > $R/kernels_gemvq_c.log 2>&1; tl "kernels gemvq c rc=$?" ) &
( timeout $(lim 200) $KT -test.v -test.run "${G}-N(1024|256|384)-" > $R/kernels_gemvq_d.log 2>&1; tl "kernels gemvq d rc=$?" ) &
( timeout $(lim 200) $BT -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' > $R/backend.log 2>&1; tl "backend rc=$?" ) &
( timeout $(lim 200) compute-sanitizer --tool memcheck $KT -test.v -test.run "${G}int4-resint4-N4096-K4096-T2-k64-ntb32-p1" > $R/memcheck.log 2>&1; tl "memcheck rc=$?" ) &
( timeout $(lim 200) compute-sanitizer --tool racecheck $KT -test.v -test.run "${G}int4-resint4-N256-K1152-T5-k512-ntb3-p2" > $R/racecheck.log 2>&1; tl "racecheck rc=$?"
  timeout $(lim 200) compute-sanitizer --tool racecheck $KT -test.v -test.run '^TestDECFusedProtocol$/int4-N384-K1000-T8-k8-ntb5-p2' > $R/racecheck_protocol.log 2>&1; tl "racecheck protocol rc=$?" ) &
wait
tl end; snap; rm -rf $R
