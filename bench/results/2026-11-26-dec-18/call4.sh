#!/bin/bash
# Session 18 DEC, call 4: the DEC warp's sums alone and copies alone (GEMVQ6DEC_DIAG=2, 3), q/o and down.
cd "$(dirname "$0")"
export BITDECODE_CACHE_DIR=/tmp/bdcache; mkdir -p $BITDECODE_CACHE_DIR
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/smi.txt
BITDECODE_GEMVQ6DEC_BENCH=1 timeout 150 ./kernels.test -test.run '^TestGEMVQ6DECDiag$' -test.v -test.timeout 140s 2>&1 | tee $OUT/diag.log | grep -v '^=== RUN'
