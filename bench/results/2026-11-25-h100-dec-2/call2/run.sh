#!/bin/bash
# s3-dec call 2: tests, memcheck, bench dec, tune dec, bench model (logs under $OUT as they go).
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/r; mkdir -p $R/T4 $R/T3
T0=$(date +%s)
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
tl start
( timeout 200 $D/kernels.test -test.run 'DEC' -test.v > $R/kernels.log 2>&1; tl "kernels rc=$?" ) &
KP=$!
( timeout 200 $D/backend.test -test.run 'QuantLinearDEC|ModelDEC|ParseOptions' -test.v > $R/backend.log 2>&1; tl "backend rc=$?" ) &
wait $KP
( timeout 90 compute-sanitizer --tool memcheck $D/kernels.test -test.v -test.run 'TestGEMVQDECMatchesSerial/(int4-resint4-N384|int4-resint4-N1024-K4096-T3|int4-resint4-N4096-K4096-T2|int4-resint4-N14336-K4096-T1-k64|int3-resint4-N14336-K4096-T1)|TestDECFusedProtocol/(Int4-N384|FP16-N14336)' > $R/memcheck.log 2>&1; tl "memcheck rc=$?" ) &
wait
B=$D/bitdecode
export BITDECODE_DEC_RESIDUAL=device
timeout 60 $B bench dec --shapes llama-3.1-8b --mode fused --residual-at device --k-chunk 8,32,64 --n-tb 8,16,32,64,128 --runs 20 --json $R/bench_dec_device.json > $R/bench_dec_device.log 2>&1; tl "bench device rc=$?"
timeout 50 $B tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T4/bitdecode.json > $R/tune8b_int4.log 2>&1; tl "tune4 rc=$?"
timeout 60 $B bench model --ctx 1k --kv int4 --weights int4 --dec-k 0,8,64,tuned:5%,tuned:10% --dec-settings $R/T4 --no-linears --steps 8 --json $R/model_int4.json > $R/model_int4.log 2>&1; tl "model4 rc=$?"
timeout 40 $B bench dec --shapes llama-3.1-8b --mode fused --residual-at host --k-chunk 8,32,64 --n-tb 8,16,32,64,128 --runs 20 --json $R/bench_dec_host.json > $R/bench_dec_host.log 2>&1; tl "bench host rc=$?"
timeout 40 $B tune dec --shapes llama-3.1-8b --weights int3 --residual-at device --slowdown 5%,10% --runs 20 --out $R/T3/bitdecode.json > $R/tune8b_int3.log 2>&1; tl "tune3 rc=$?"
timeout 50 $B bench model --ctx 1k --kv int4 --weights int3 --dec-k 0,8,64,tuned:5%,tuned:10% --dec-settings $R/T3 --no-linears --steps 8 --json $R/model_int3.json > $R/model_int3.log 2>&1; tl "model3 rc=$?"
BITDECODE_DEC_RESIDUAL=host timeout 40 $B bench model --ctx 1k --kv int4 --weights int4 --dec-k 0,8,64 --no-linears --steps 8 --json $R/model_int4_host.json > $R/model_int4_host.log 2>&1; tl "model4 host rc=$?"
tl end
cd $OUT && tar czf results.tgz r && rm -rf r
