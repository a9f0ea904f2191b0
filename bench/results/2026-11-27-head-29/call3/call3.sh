#!/bin/bash
# Session 29 call 3: the quantized head and the tied lookup of its values (model's headValues) on the GPU.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W
xz -dc $P/gpu.test.xz > $W/gpu.test; chmod +x $W/gpu.test
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/backend/gpu && timeout 300 $W/gpu.test -test.run 'TestModelQuantHeadSynth|TestQuantLinear$' -test.v -test.timeout 300s > $OUT/t1.log 2>&1; echo "t1 rc $? at $SECONDS s"
grep -h -- "^--- \|^    --- \|^ok\|^FAIL\|^PASS\|panic" $OUT/t1.log | head -30
