#!/bin/bash
# rotary call 1: make the partial-rotary fixtures with transformers, then run the CPU and GPU comparisons
# on every fixture, and the GPU synthetic partial-rotary family (every KV format, GPU against CPU).
H=$(cd "$(dirname "$0")" && pwd)
W=/tmp/hfw
rm -rf $W; mkdir -p $W/internal/hfcheck $W/kvcache/gpukv
cp -r internal/hfcheck/testdata $W/internal/hfcheck/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.log
python3 -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' 2>&1 | tee -a $OUT/env.log
export PYTHONUNBUFFERED=1
NEW="phi3-partial075-gqa2-d128-bf16 phi3-partial075-longrope-d128-bf16"
( time python3 $H/gen.py $W/internal/hfcheck/testdata $NEW ) > $OUT/gen.log 2>&1
echo "gen rc=$?" | tee -a $OUT/gen.log
grep -E "ok;|FAILED|Error|error" $OUT/gen.log | cut -c1-800
for n in $NEW; do cat $W/internal/hfcheck/testdata/$n/config.json; done > $OUT/configs.log 2>&1
( cd $W/internal/hfcheck && timeout 200 $H/hfcheck.test -test.v -test.count=1 -test.run 'TestTransformersCPU|TestFixtures' -test.timeout 190s > $OUT/cpu.log 2>&1; echo "cpu rc=$?" >> $OUT/cpu.log ) &
( cd $W/kvcache/gpukv && timeout 270 $H/gpukv.test -test.v -test.count=1 -test.run 'TestGPUTransformers' -test.timeout 260s > $OUT/gpu.log 2>&1; echo "gpu rc=$?" >> $OUT/gpu.log ) &
( cd $W/kvcache/gpukv && timeout 270 $H/gpukv.test -test.v -test.count=1 -test.run 'TestGPUSyntheticFamilies/phi4' -test.timeout 260s > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log ) &
wait
(cd $W/internal/hfcheck/testdata && tar czf $OUT/fixtures.tgz $NEW)
du -sh $W/internal/hfcheck/testdata/phi3-partial*
echo "=== CPU"; grep -E "^(--- |    |ok|FAIL|PASS|cpu rc)" $OUT/cpu.log | grep -i "partial\|FAIL\|rc=\|^ok\|^PASS" | cut -c1-300 | tail -30
echo "=== GPU"; grep -E "^(--- |    |ok|FAIL|PASS|gpu rc)" $OUT/gpu.log | grep -i "partial\|FAIL\|rc=\|^ok\|^PASS" | cut -c1-300 | tail -30
echo "=== SYNTH"; grep -E "^(--- |    |ok|FAIL|PASS|synth rc)" $OUT/synth.log | cut -c1-300 | tail -20
