#!/bin/bash
# Session 18 DEC, call 1: gemv_q6_dec's exactness test, its bench against v6.1, main's bench dec (int3, device residuals).
cd "$(dirname "$0")"
export BITDECODE_CACHE_DIR=/tmp/bdcache; mkdir -p $BITDECODE_CACHE_DIR
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/smi.txt
t0=$(date +%s)
timeout 200 ./kernels.test -test.run '^TestGEMVQ6DECMatchesV61$' -test.v -test.timeout 190s 2>&1 | tee $OUT/test.log | grep -v '^=== RUN' | tail -30
echo "test rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
BITDECODE_GEMVQ6DEC_BENCH=1 timeout 150 ./kernels.test -test.run '^TestGEMVQ6DECTimes$' -test.v -test.timeout 140s 2>&1 | tee $OUT/bench6dec.log | grep -v '^=== RUN'
echo "bench rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
BITDECODE_DEC_RESIDUAL=device timeout 150 ./bitdecode-main bench dec --weights int3 --residual-at device --k-chunk 1,64 --n-tb 32,64 --runs 10 > $OUT/benchdec_main_int3.txt 2> $OUT/benchdec_main_int3.err
echo "bench dec rc $? at $(( $(date +%s) - t0 )) s"
tail -40 $OUT/benchdec_main_int3.txt
