#!/bin/bash
# moeq call 1 (session 19): packed experts routed on the device. Phase 1: the
# correctness tests, two processes in parallel; phase 2: the T = 1 timing alone.
D=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
(cd backend/gpu && timeout 200 $D/gpu.test -test.run 'TestMixQuantExperts$|TestMixExperts$' -test.v -test.timeout 195s > $OUT/backend.log 2>&1; echo "rc $?" >> $OUT/backend.log) &
(cd kvcache/gpukv && timeout 200 $D/gpukv.test -test.run 'TestGPUMoEQuantizedExperts|TestGPUMoEGraphReplaySameBits' -test.v -test.timeout 195s > $OUT/gpukv.log 2>&1; echo "rc $?" >> $OUT/gpukv.log) &
wait
(cd backend/gpu && BITDECODE_MOE_TIMING=1 timeout 170 $D/gpu.test -test.run 'TestMixQuantExpertsTiming' -test.v -test.timeout 165s > $OUT/timing.log 2>&1; echo "rc $?" >> $OUT/timing.log)
grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok|rc )|moeq_test|moe_test' $OUT/backend.log | head -60
grep -E '^(\s*--- |PASS|FAIL|ok|rc )|graphs on|worst|moe_test' $OUT/gpukv.log | head -50
grep -E '^(\s*--- |PASS|FAIL|ok|rc )|read ceiling|a layer|host − device|moeq_test' $OUT/timing.log | head -40
