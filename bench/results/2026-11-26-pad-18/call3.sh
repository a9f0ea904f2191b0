#!/bin/bash
# s18-pad call 3: call 2 with the fold expectation fixed (nothing between RoPE and the cache: no q/k norms, no run-time q scale).
# (fused, post norms, whole-projection q/k norms, 1 + w: as TestGPUSyntheticFamilies writes them),
# the padded d96/d80 families included.
set -o pipefail
cd .gpu-pad; G=$PWD; R=$OUT/r3; mkdir -p $R
python3 -c "
import lzma,shutil
with lzma.open('gpukv.test.xz') as a, open('gpukv.test','wb') as b: shutil.copyfileobj(a,b)
"
chmod +x gpukv.test
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv; cd $G/kvcache/gpukv
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
timeout 280 $G/gpukv.test -test.v -test.timeout 280s -test.run '^(TestGPURoPEAppendSameBits)$' > $R/gpukv3.log 2>&1; echo "rc=$?" >> $R/gpukv3.log
grep -E -- '--- (FAIL|PASS)|rc=' $R/gpukv3.log
grep -E 'ropekv_test.go:[0-9]+: [^0-9a-z]|Fatal|no tensor' $R/gpukv3.log | head
