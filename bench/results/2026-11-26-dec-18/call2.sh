#!/bin/bash
# Session 18 DEC, call 2: the diagnostic forms on q/o and down, then the exactness test (one DEC warp and the copier/summer pair).
cd "$(dirname "$0")"
export BITDECODE_CACHE_DIR=/tmp/bdcache; mkdir -p $BITDECODE_CACHE_DIR
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/smi.txt
t0=$(date +%s)
BITDECODE_GEMVQ6DEC_BENCH=1 timeout 200 ./kernels.test -test.run '^TestGEMVQ6DECDiag$' -test.v -test.timeout 190s 2>&1 | tee $OUT/diag.log | grep -v '^=== RUN'
echo "diag rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
timeout 200 ./kernels.test -test.run '^TestGEMVQ6DECMatchesV61$' -test.v -test.timeout 190s 2>&1 | tee $OUT/test.log | grep -v '^=== RUN' | tail -12
echo "test rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
