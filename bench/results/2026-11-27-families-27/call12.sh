#!/bin/bash
# session 27 call 12 (2026-11-27): skinny.cu's v1 and v3 tile loads from one loadRows (the same
# copies in the same order): the skinny GEMM's reference tests on the H100.
R=$OUT; cd .gpu-s27 && xz -d kernels.test.xz && chmod +x kernels.test
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $R/times.txt
BITDECODE_CACHE_DIR=/tmp/bdc timeout 280 ./kernels.test -test.v -test.run 'Skinny' > $R/skinny.log 2>&1; echo "rc=$?" >> $R/skinny.log
grep -E "^(---|    ---|ok|FAIL|PASS|rc=)" $R/skinny.log | head -30
