#!/bin/bash
# moeq call 1: packed experts routed on the device (tests + T = 1 timing).
D=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
(cd backend/gpu && BITDECODE_MOE_TIMING=1 timeout 230 $D/gpu.test -test.run 'TestMixQuantExperts|TestMixExperts$' -test.v -test.timeout 225s > $OUT/backend.log 2>&1; echo "rc $?" >> $OUT/backend.log) &
(cd kvcache/gpukv && timeout 230 $D/gpukv.test -test.run 'TestGPUMoEQuantizedExperts|TestGPUMoEGraphReplaySameBits' -test.v -test.timeout 225s > $OUT/gpukv.log 2>&1; echo "rc $?" >> $OUT/gpukv.log) &
wait
grep -E '^(=== RUN|--- |PASS|FAIL|ok|rc )|read ceiling|a layer|host − device|moe_test|moeq_test' $OUT/backend.log | head -80
grep -E '^(\s*--- |PASS|FAIL|ok|rc )|graphs on|worst|moe_test' $OUT/gpukv.log | head -60
