#!/bin/bash
# moe call 2: remake the three MoE fixtures (router gain 3, router margins recorded), then the
# CPU and GPU conformance tests on every fixture, the MoE GPU tests (device routing against
# float64, graphs on/off bits at batches 1-4, int8 experts routed on the host vs CPU), and
# last, alone, the timing of the device mixture at Mixtral-8x7B and Qwen3-30B-A3B shapes.
set -o pipefail
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/hfw; R=$OUT
rm -rf $W; mkdir -p $W/internal/hfcheck $W/kvcache/gpukv $W/backend/gpu
cp -r internal/hfcheck/testdata $W/internal/hfcheck/
export BITDECODE_CACHE_DIR=/tmp/bdcache PYTHONUNBUFFERED=1
NEW="mixtral-e8top2-gqa3-bf16 qwen2moe-e4top2-shared-fp16 qwen3moe-e8top2-gqa3-d128-bf16"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  time python3 $G/gen.py $W/internal/hfcheck/testdata $NEW; echo "gen rc=$?"; } > $R/gen.log 2>&1
grep -E "ok;|FAILED|rc=|Error" $R/gen.log | cut -c1-700
(cd $W/internal/hfcheck/testdata && tar czf $R/fixtures.tgz $NEW)
tst() { local log=$1 dir=$2 bin=$3 run=$4 to=$5; (cd $W/$dir && timeout $to $G/$bin -test.v -test.count=1 -test.run "$run" -test.timeout ${to}s > $R/$log 2>&1; echo "rc=$?" >> $R/$log) & }
tst cpu.log internal/hfcheck hfcheck.test 'TestTransformersCPU|TestFixtures' 150
tst gpu.log kvcache/gpukv gpukv.test '^TestGPUTransformers$' 280
tst moe.log kvcache/gpukv gpukv.test '^(TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts)$' 280
tst mix.log backend/gpu backend.test '^TestMixExperts$' 200
wait
date -u >> $R/gen.log
(cd $W/backend/gpu && BITDECODE_MOE_TIMING=1 timeout 200 $G/backend.test -test.v -test.count=1 -test.run '^TestMixExpertsTiming$' -test.timeout 200s > $R/timing.log 2>&1; echo "rc=$?" >> $R/timing.log)
date -u >> $R/gen.log
for f in cpu gpu moe mix timing; do echo "== $f: $(grep -c -- '--- FAIL' $R/$f.log) FAIL, $(grep -c -- '--- PASS' $R/$f.log) PASS, $(tail -1 $R/$f.log)"; done
grep -hE "moe|mixtral|FAIL|panic" $R/cpu.log $R/gpu.log | grep -E "KV|FAIL|panic|---" | cut -c1-220 | head -40
grep -hE "worst|graphs on|FAIL|panic|T [18]:" $R/moe.log $R/mix.log $R/timing.log | cut -c1-300 | head -40
