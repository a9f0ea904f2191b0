#!/bin/bash
# Session 18 DEC, call 3: exactness with decRows8 (one DEC warp and the pair), then the per-shape bench and the diagnostic forms.
cd "$(dirname "$0")"
export BITDECODE_CACHE_DIR=/tmp/bdcache; mkdir -p $BITDECODE_CACHE_DIR
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee $OUT/smi.txt
t0=$(date +%s)
timeout 200 ./kernels.test -test.run '^TestGEMVQ6DECMatchesV61$' -test.v -test.timeout 190s 2>&1 | tee $OUT/test.log | grep -v '^=== RUN' | tail -9
echo "test rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
BITDECODE_GEMVQ6DEC_BENCH=1 timeout 150 ./kernels.test -test.run '^TestGEMVQ6DEC(Times|Diag)$' -test.v -test.timeout 140s 2>&1 | tee $OUT/bench.log | grep -v '^=== RUN'
echo "bench rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
