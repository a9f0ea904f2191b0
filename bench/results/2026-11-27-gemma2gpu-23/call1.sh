#!/bin/bash
# s23-gemma2gpu's one device call: the soft-cap tests, TestGPUTransformers and TestGPUDecodeSeqSplits,
# in parallel processes (each compiles its kernels with NVRTC first). Run as bash .gpu-gemma2gpu/call1.sh
# from /work/main's root with the test binaries carried in .gpu-gemma2gpu.
R=$(pwd); G=$R/.gpu-gemma2gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t() { # t LOG DIR BINARY RUN
  (cd $R/$2 && timeout 205 $G/$3 -test.run "$4" -test.count 1 -test.timeout 200s -test.v > $OUT/$1.log 2>&1; echo rc=$? >> $OUT/$1.log)
}
t cap_mma gpu/kernels kernels.test 'TestGPUDecodeSoftcapMatchesReference/^mma$' &
t cap_v1 gpu/kernels kernels.test 'TestGPUDecodeSoftcapMatchesReference/^v1$' &
t cap_wgmma gpu/kernels kernels.test 'TestGPUDecodeSoftcapMatchesReference/^wgmma$' &
t cap_rows_splits gpu/kernels kernels.test 'TestGPUSoftcapRows|TestGPUDecodeSoftcapShape|TestGPUDecodeSeqSplits' &
t gpukv kvcache/gpukv gpukv.test 'TestGPUTransformers|TestGPUSoftcapPaged' &
wait
grep -h -- "^--- \|^    --- \|rc=" $OUT/*.log
