#!/bin/bash
# hdim session 17: the GPU caches' head-dim refusal and the fixtures on the GPU.
set -o pipefail
H=$(pwd)/.gpu-hdim
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/gpu.txt
(cd kvcache/gpukv && $H/gpukv.test -test.run 'TestGPUTransformers' -test.v -test.timeout 280s 2>&1 | tee $OUT/gpukv_transformers.log) &
(cd gpu/kernels && $H/kernels.test -test.run 'TestGPUPackMatchesGo' -test.v -test.timeout 280s 2>&1 | tee $OUT/kernels_pack.log) &
wait
grep -h -E "^(--- |ok|FAIL|PASS)|refuse|head dim" $OUT/*.log | head -60
