#!/bin/bash
# hfcheck call 1: make the fixtures with transformers, then run bitdecode's CPU and GPU comparisons on them.
H=$(cd "$(dirname "$0")" && pwd)
W=/tmp/hfw
rm -rf $W; mkdir -p $W/internal/hfcheck/testdata $W/kvcache/gpukv
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.log
python3 -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' 2>&1 | tee -a $OUT/env.log
export PYTHONUNBUFFERED=1
( time python3 $H/gen.py $W/internal/hfcheck/testdata ) > $OUT/gen.log 2>&1
echo "gen rc=$?" | tee -a $OUT/gen.log
grep -E "ok;|FAILED|Error|error" $OUT/gen.log | cut -c1-600
( cd $W/internal/hfcheck && timeout 200 $H/hfcheck.test -test.v -test.count=1 -test.run 'TestTransformersCPU|TestFixtures' -test.timeout 190s > $OUT/cpu.log 2>&1; echo "cpu rc=$?" >> $OUT/cpu.log ) &
( cd $W/kvcache/gpukv && timeout 250 $H/gpukv.test -test.v -test.count=1 -test.run 'TestGPUTransformers' -test.timeout 240s > $OUT/gpu.log 2>&1; echo "gpu rc=$?" >> $OUT/gpu.log ) &
wait
tar czf $OUT/fixtures.tgz -C $W/internal/hfcheck testdata
du -sh $W/internal/hfcheck/testdata/*
echo "=== CPU"; grep -E "^(=== RUN|--- |    |ok|FAIL|PASS|cpu rc)" $OUT/cpu.log | grep -vE "=== RUN" | cut -c1-300 | tail -60
echo "=== GPU"; grep -E "^(--- |    |ok|FAIL|PASS|gpu rc)" $OUT/gpu.log | cut -c1-300 | tail -60
