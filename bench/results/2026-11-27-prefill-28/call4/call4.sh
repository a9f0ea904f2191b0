#!/bin/bash
# s28-prefill call 4: BenchmarkPrefillAttention (prefill.cu v3 beside
# decode_mma.cu's prefill plan) on one H100.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-pf; W=/tmp/w; mkdir -p $W
xz -dc $P/kernels.test.xz > $W/kernels.test; chmod +x $W/kernels.test
export BITDECODE_CACHE_DIR=/tmp/bdc
cd $R/gpu/kernels && timeout 280 $W/kernels.test -test.run '^$' -test.bench PrefillAttention -test.benchtime 1x 2>&1 | tee $OUT/bench-attn.txt
echo "end at $SECONDS s"
