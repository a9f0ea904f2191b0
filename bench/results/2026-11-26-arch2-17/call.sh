#!/bin/bash
# arch2 call 1: make the Granite, OLMo 2 and Gemma 3 fixtures with transformers, then run the CPU and GPU
# comparisons on every fixture, and the GPU synthetic families of the three (every KV format, GPU against CPU).
H=$(cd "$(dirname "$0")" && pwd)
W=/tmp/hfw
rm -rf $W; mkdir -p $W/internal/hfcheck $W/kvcache/gpukv
cp -r internal/hfcheck/testdata $W/internal/hfcheck/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.log
python3 -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' 2>&1 | tee -a $OUT/env.log
export PYTHONUNBUFFERED=1
NEW="granite-gqa2-d64-bf16 granite-bias-tied-fp16 olmo2-gqa2-d64-bf16 olmo2-bias-tied-fp32 gemma3-swa16-qpas32-bf16 gemma3-legacy-gqa2-d32-bf16"
( cd $W/kvcache/gpukv && timeout 280 $H/gpukv.test -test.v -test.count=1 -test.run 'TestGPUSyntheticFamilies/(granite|olmo2|gemma3)' -test.timeout 270s > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log ) &
( time python3 $H/gen.py $W/internal/hfcheck/testdata $NEW ) > $OUT/gen.log 2>&1
echo "gen rc=$?" | tee -a $OUT/gen.log
grep -E "ok;|FAILED|Error|error" $OUT/gen.log | cut -c1-900
for n in $NEW; do echo "== $n"; cat $W/internal/hfcheck/testdata/$n/config.json; done > $OUT/configs.log 2>&1
(cd $W/internal/hfcheck/testdata && tar czf $OUT/fixtures.tgz $NEW)
( cd $W/internal/hfcheck && timeout 200 $H/hfcheck.test -test.v -test.count=1 -test.run 'TestTransformersCPU|TestFixtures' -test.timeout 190s > $OUT/cpu.log 2>&1; echo "cpu rc=$?" >> $OUT/cpu.log ) &
( cd $W/kvcache/gpukv && timeout 250 $H/gpukv.test -test.v -test.count=1 -test.run 'TestGPUTransformers' -test.timeout 240s > $OUT/gpu.log 2>&1; echo "gpu rc=$?" >> $OUT/gpu.log ) &
wait
du -sh $W/internal/hfcheck/testdata/{granite,olmo2,gemma3}* 2>/dev/null
echo "=== CPU"; grep -E "^(--- |    |ok|FAIL|PASS|cpu rc)" $OUT/cpu.log | grep -iE "granite|olmo|gemma3|FAIL|rc=|^ok|^PASS" | cut -c1-260 | tail -40
echo "=== GPU"; grep -E "^(--- |    |ok|FAIL|PASS|gpu rc)" $OUT/gpu.log | grep -iE "granite|olmo|gemma3|FAIL|rc=|^ok|^PASS" | cut -c1-260 | tail -40
echo "=== SYNTH"; grep -E "^(--- |    |ok|FAIL|PASS|synth rc)" $OUT/synth.log | cut -c1-260 | tail -30
