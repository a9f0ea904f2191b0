#!/bin/bash
# synth.sh (session 11): TestGPUSyntheticFamilies on the GPU (head dims 64/128, GQA 3/4/7 and MQA,
# biases, Qwen3's q/k norms, bf16/fp16/fp32 checkpoints; fp16, int8, int4, k4v2, int2 KV).
cd .gpu; R=$OUT/r; mkdir -p $R; cp synth.sh $R/
timeout 230 ./gpukv.test -test.v -test.timeout 230s -test.run '^TestGPUSyntheticFamilies$' > $R/synth.log 2>&1; echo "rc=$?" >> $R/synth.log
grep -h -- '--- \|synth_test.go\|^ok\|^FAIL\|^PASS\|rc=' $R/synth.log | tail -60
