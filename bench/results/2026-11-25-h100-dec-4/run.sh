#!/bin/bash
# s7-dec call 1: DEC v5 (lists shared in a LinearGroup, fences skipped): tests + memcheck while the
# CUBIN cache fills (v5's and v4.1's modules), then the timings alone: bench dec (v5), tune dec,
# bench model, bench dec with v4.1's binary (main 7de578c) on the same machine. Logs under $OUT/r.
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4; cp $D/run.sh $R/
T0=$(date +%s); END=$((T0 + 238))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B=$D/bitdecode; OLD=$D/bitdecode-v41
export BITDECODE_DEC_RESIDUAL=device
DECW="--mode fused --residual-at device --k-chunk 8 --n-tb 8 --runs 1"
DECA="--shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 1,8,64 --n-tb 8,32,64,128 --runs 20"
tl start
( timeout $(lim 140) $D/kernels.test -test.v -test.run '^(TestGEMVQDECMatchesSerial|TestDECFusedProtocol)$' > $R/kernels.log 2>&1; tl "kernels rc=$?" ) &
( timeout $(lim 135) $D/backend.test -test.v -test.run '^(TestQuantLinearDEC|TestQuantLinearGroupDEC)$' > $R/backend.log 2>&1; tl "backend rc=$?" ) &
( timeout $(lim 90) $OLD bench dec --shapes 1024x4096 $DECW > $R/warm_v41.log 2>&1; tl "warm v4.1 rc=$?" ) &
timeout $(lim 80) $B bench dec --shapes 1024x4096 $DECW > $R/warm.log 2>&1; tl "warm rc=$?"
( timeout $(lim 140) compute-sanitizer --tool memcheck $D/kernels.test -test.v -test.run 'TestGEMVQDECMatchesSerial/int4-resint4-N14336-K4096-T1-k64-ntb64-p2' > $R/memcheck.log 2>&1; tl "memcheck rc=$?" ) &
wait; snap
timeout $(lim 40) $B bench dec $DECA --json $R/bench_dec.json > $R/bench_dec.log 2>&1; tl "bench dec rc=$?"; snap
timeout $(lim 25) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune rc=$?"; snap
timeout $(lim 60) $B bench model --ctx 1k --kv int4 --weights int4 --dec-k 0,64,tuned:5%,tuned:10%,0 --dec-settings $R/T4 --no-linears --steps 16 --json $R/model_int4.json > $R/model_int4.log 2>&1; tl "model rc=$?"; snap
timeout $(lim 40) $OLD bench dec $DECA --json $R/bench_dec_v41.json > $R/bench_dec_v41.log 2>&1; tl "bench dec v4.1 rc=$?"
tl end; snap; rm -rf $R
