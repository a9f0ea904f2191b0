#!/bin/bash
# moe call 5: the branch's final commit: every fixture on the GPU, the MoE GPU tests, and as
# regression of the shared forward (residualFrom, per-layer tag conditions) the synthetic dense
# families GPU against CPU and the graph-replay bits of the embedded model.
set -o pipefail
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/hfw5; R=$OUT
rm -rf $W; mkdir -p $W/internal/hfcheck $W/kvcache/gpukv $W/backend/gpu
cp -r internal/hfcheck/testdata $W/internal/hfcheck/
tar xzf $G/moefx.tgz -C $W/internal/hfcheck/testdata
export BITDECODE_CACHE_DIR=/tmp/bdcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/env.log
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $W/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst gpu.log kvcache/gpukv gpukv.test '^(TestGPUTransformers|TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts)$' 250
tst synth.log kvcache/gpukv gpukv.test '^(TestGPUSyntheticFamilies|TestGPUGraphReplaySameBits)$' 250
tst mix.log backend/gpu backend.test '^(TestMixExperts|TestModelMatchesCPU)$' 200
wait
date -u >> $R/env.log
for f in gpu synth mix; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(grep -c -- '--- SKIP' $R/$f.log) SKIP, $(tail -1 $R/$f.log)"; done
grep -hE -- "--- FAIL|panic" $R/*.log | head
grep -hE "worst|graphs on" $R/gpu.log $R/mix.log | cut -c1-200 | tail -12
cat $R/env.log
