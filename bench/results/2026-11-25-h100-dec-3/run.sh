#!/bin/bash
# s4-dec call: bench dec, tests + memcheck, tune dec, bench model (logs under $OUT as they go).
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4
T0=$(date +%s)
END=$((T0 + 226))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
tl start
B=$D/bitdecode
export BITDECODE_DEC_RESIDUAL=device
timeout $(lim 55) $B bench dec --shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 8,64 --n-tb 8,16,32,64,128 --runs 20 --json $R/bench_dec_device.json > $R/bench_dec_device.log 2>&1; tl "bench device rc=$?"
( timeout $(lim 125) $D/kernels.test -test.run 'DEC|GEMVQ' -test.v > $R/kernels.log 2>&1; tl "kernels rc=$?" ) &
( timeout $(lim 110) $D/backend.test -test.run 'QuantLinearDEC' -test.v > $R/backend.log 2>&1; tl "backend rc=$?" ) &
( timeout $(lim 110) compute-sanitizer --tool memcheck $D/kernels.test -test.v -test.run 'TestGEMVQDECMatchesSerial/(int4-resint4-N4096-K4096-T1-k8|int4-resint4-N14336-K4096-T1-k64|int4-resint4-N4096-K14336-T2-k64|int3-resint4-N14336-K4096-T1|int4-resint4-N384)' > $R/memcheck.log 2>&1; tl "memcheck rc=$?" ) &
wait
timeout $(lim 30) $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune4 rc=$?"
timeout $(lim 60) $B bench model --ctx 1k --kv int4 --weights int4 --dec-k 0,8,64,tuned:5%,tuned:10% --dec-settings $R/T4 --no-linears --steps 8 --json $R/model_int4.json > $R/model_int4.log 2>&1; tl "model4 rc=$?"
tl end
cd $OUT && tar czf results.tgz r && rm -rf r
