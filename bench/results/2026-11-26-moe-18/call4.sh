#!/bin/bash
# moe call 4: the router keeps its probabilities in registers (E <= 256); T = 128 timed; the MoE GPU tests again (transformers' MoE fixtures on
# every GPU cache, graphs on/off bits, device routing against float64, int8 experts routed on the
# host against the CPU on synthetic checkpoints), then alone the timing of the device mixture.
set -o pipefail
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/hfw; R=$OUT
rm -rf $W; mkdir -p $W/internal/hfcheck $W/kvcache/gpukv $W/backend/gpu
cp -r internal/hfcheck/testdata $W/internal/hfcheck/
tar xzf $G/moefx.tgz -C $W/internal/hfcheck/testdata
export BITDECODE_CACHE_DIR=/tmp/bdcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/env.log
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $W/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst gpu.log kvcache/gpukv gpukv.test '^TestGPUTransformers$/(mixtral|qwen2moe|qwen3moe)' 200
tst moe.log kvcache/gpukv gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts)$' 200
tst mix.log backend/gpu backend.test '^TestMixExperts$' 200
wait
date -u >> $R/env.log
(cd $W/backend/gpu && BITDECODE_MOE_TIMING=1 timeout 200 $G/backend.test -test.v -test.count=1 -test.run '^TestMixExpertsTiming$' -test.timeout 200s > $R/timing.log 2>&1; echo "rc=$?" >> $R/timing.log)
date -u >> $R/env.log
for f in gpu moe mix timing; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(tail -1 $R/$f.log)"; done
grep -hE "KV on|worst|graphs on|FAIL|panic|T [18]:" $R/gpu.log $R/moe.log $R/mix.log $R/timing.log | sed 's/hfcheck_test.go:100: //; s/ on cuda (NVIDIA H100 80GB HBM3, sm_90a)//' | cut -c1-330 | head -50
cat $R/env.log
