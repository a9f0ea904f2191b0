#!/bin/bash
# moe3 call 1 (the only one): the MoE GPU tests of the branch (v1 and the grouped path at every
# tile size against float64, tile sizes bitwise, the grouped prefill against the CPU, graphs on/off
# bits, transformers' MoE fixtures) in parallel, with main's binary warming its own kernel cache;
# then alone the per-layer timing, main's binary (v1, v2 32-bit loads, v2 ldmatrix) and the
# branch's (v1, then tiles of 64, 16, 32, 64, 16 rows), each with the read ceiling before and after.
set -o pipefail
D=$(cd "$(dirname "$0")" && pwd); R=$OUT; ROOT=$(pwd)
G=/tmp/moe3b; mkdir -p $G && tar xJf $D/b.tar.xz -C $G
export BITDECODE_CACHE_DIR=/tmp/bdcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > $R/env.log
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $ROOT/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst mix.log backend/gpu backend.test '^(TestMixExperts|TestMixExpertsGrouped)$' 95
tst moe.log kvcache/gpukv gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEGroupedPrefill|TestGPUTransformers)$/(mixtral|qwen)' 95
tst warm-base.log backend/gpu base.test '^TestMixExpertsGrouped$' 95
wait
date -u >> $R/env.log
for b in base:35 backend:55; do
  n=${b%:*} to=${b#*:}
  (cd $ROOT/backend/gpu && BITDECODE_MOE_TIMING=1 timeout $to $G/$n.test -test.v -test.count=1 -test.run '^TestMixExpertsTiming$' -test.timeout ${to}s > $R/t-$n.log 2>&1; echo "rc=$?" >> $R/t-$n.log)
  date -u >> $R/env.log
done
for f in mix moe warm-base t-base t-backend; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(grep -c -- '--- SKIP' $R/$f.log) SKIP, $(tail -1 $R/$f.log)"; done
grep -hE -- "--- FAIL|panic|Error|error" $R/mix.log $R/moe.log | head -20
grep -hE "worst|graphs on" $R/mix.log $R/moe.log | cut -c1-200 | tail -12
grep -hE "a layer|read ceiling" $R/t-base.log $R/t-backend.log | sed 's/moe_test.go:[0-9]*: //; s/ (sync per 8 layers, graphs {\(Direct:[0-9]*\) .*Replayed:\([0-9]*\)[^)]*)/ [\1 R\2]/; s/; chosen experts.*//' | cut -c1-150
cat $R/env.log
