#!/bin/bash
# moe2 call 1: the MoE GPU tests (v1 GEMVs and the v2 grouped path against float64, the grouped
# prefill against the CPU, graphs on/off bits, int8 host routing, transformers' MoE fixtures) in
# parallel; then alone the per-layer timing: base binary (v1 only), new binary (v1 and v2 per T).
set -o pipefail
G=$(cd "$(dirname "$0")" && pwd)/b; R=$OUT; ROOT=$(pwd)
export BITDECODE_CACHE_DIR=/tmp/bdcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > $R/env.log
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $ROOT/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst mix.log backend/gpu backend.test '^(TestMixExperts|TestMixExpertsGrouped)$' 170
tst moe.log kvcache/gpukv gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts|TestGPUMoEGroupedPrefill)$' 170
tst hf.log kvcache/gpukv gpukv.test '^TestGPUTransformers$/(mixtral|qwen2moe|qwen3moe)' 170
wait
date -u >> $R/env.log
for b in base backend; do
  (cd $ROOT/backend/gpu && BITDECODE_MOE_TIMING=1 timeout 150 $G/$b.test -test.v -test.count=1 -test.run '^TestMixExpertsTiming$' -test.timeout 150s > $R/t-$b.log 2>&1; echo "rc=$?" >> $R/t-$b.log)
  date -u >> $R/env.log
done
for f in mix moe hf t-base t-backend; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(grep -c -- '--- SKIP' $R/$f.log) SKIP, $(tail -1 $R/$f.log)"; done
grep -hE -- "--- FAIL|panic|Error|error" $R/mix.log $R/moe.log $R/hf.log | head -20
grep -hE "worst|graphs on" $R/mix.log $R/moe.log | cut -c1-220 | tail -16
grep -hE "a layer|grouped −|router alone" $R/t-base.log $R/t-backend.log | sed 's/moe_test.go:[0-9]*: //' | cut -c1-200
cat $R/env.log
