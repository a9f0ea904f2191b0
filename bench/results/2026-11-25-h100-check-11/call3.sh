#!/bin/bash
# Lead's call 3 (2026-11-25, nvidia-h100-x1): TestGPUPlanesSplits on the merged tree (cut by call 1's limit).
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x kernels.test
date -u > $R/times.txt; nvidia-smi --query-gpu=name --format=csv >> $R/times.txt
timeout 230 ./kernels.test -test.v -test.timeout 230s -test.run '^TestGPUPlanesSplits$' > $R/planes_splits.log 2>&1; echo "rc=$?" >> $R/planes_splits.log
date -u >> $R/times.txt
