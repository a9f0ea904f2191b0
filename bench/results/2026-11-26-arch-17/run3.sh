#!/bin/bash
# Device call 3 (session 17, arch): kvcache/gpukv TestGPUTransformers on
# every internal/hfcheck fixture, Phi-3 and Gemma now included (phi3-d96 on
# the dense cache, its paged caches required to refuse head dim 96).
xz -dc .gpu-arch/gpukv.test.xz > /tmp/gpukv.test && chmod +x /tmp/gpukv.test || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/env.log
timeout 250 /tmp/gpukv.test -test.v -test.count=1 -test.run 'TestGPUTransformers' -test.timeout 240s > $OUT/gpu.log 2>&1; echo "gpu rc=$?" >> $OUT/gpu.log
grep -E "^(--- |    |ok|FAIL|PASS|gpu rc)" $OUT/gpu.log | cut -c1-260 | tail -70
