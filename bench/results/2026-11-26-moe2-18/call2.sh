#!/bin/bash
# moe2 call 2: ldmatrix fragments (same bits as 32-bit loads); the per-element bound; grouped and v1
# against the CPU; the MoE GPU tests in parallel; then alone the per-layer timing, base binary (v1
# only) and new binary (v1, grouped with 32-bit loads, grouped with ldmatrix per T, T 64 added).
set -o pipefail
G=$(cd "$(dirname "$0")" && pwd)/b; R=$OUT; ROOT=$(pwd)
export BITDECODE_CACHE_DIR=/tmp/bdcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > $R/env.log
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $ROOT/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst mix.log backend/gpu backend.test '^(TestMixExperts|TestMixExpertsGrouped)$' 170
tst moe.log kvcache/gpukv gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts|TestGPUMoEGroupedPrefill|TestGPUTransformers)$/(mixtral|qwen)' 170
wait
date -u >> $R/env.log
for b in base backend; do
  (cd $ROOT/backend/gpu && BITDECODE_MOE_TIMING=1 timeout 150 $G/$b.test -test.v -test.count=1 -test.run '^TestMixExpertsTiming$' -test.timeout 150s > $R/t-$b.log 2>&1; echo "rc=$?" >> $R/t-$b.log)
  date -u >> $R/env.log
done
for f in mix moe t-base t-backend; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(grep -c -- '--- SKIP' $R/$f.log) SKIP, $(tail -1 $R/$f.log)"; done
grep -hE -- "--- FAIL|panic|Error|error" $R/mix.log $R/moe.log | head -20
grep -hE "worst|graphs on" $R/mix.log $R/moe.log | cut -c1-220 | tail -16
grep -hE "a layer|grouped −|router alone" $R/t-base.log $R/t-backend.log | sed 's/moe_test.go:[0-9]*: //' | cut -c1-200
cat $R/env.log
