#!/bin/bash
# Session 15e call 1 (H100): TestGEMVQTiledMatchesWQ (both dequantization forms, both layouts)
# while both gpu.test binaries fill the CUBIN cache; then BenchmarkPrefillPieces (the pieces one by
# one with events, the read ceiling); then BenchmarkQuantLinearLayout at T = 512, main's gpu.test
# (gpu-base.test) against this branch's, alternated A B A B; last this branch's rows at T = 64,
# 512, 2048 with fp16 weights. Run from the repo root with .gpu-prefill carried.
set -o pipefail
cd .gpu-prefill; chmod +x *.test
export BITDECODE_CACHE_DIR=$PWD/cache
t() { date -u +%T" $*" | tee -a $OUT/times.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $OUT/times.txt
t start
(timeout 150 ./kernels.test -test.v -test.timeout 150s -test.run '^TestGEMVQTiledMatchesWQ$' > $OUT/tests.log 2>&1; echo "rc=$?" >> $OUT/tests.log) &
AB='^BenchmarkQuantLinearLayout$/int/x/^T=512$'
timeout 120 ./gpu-base.test -test.run '^$' -test.bench "$AB/^tiled$" -test.benchtime 1x > /dev/null 2>&1 &
timeout 120 ./gpu.test -test.run '^$' -test.bench "$AB/^tiled$" -test.benchtime 1x > /dev/null 2>&1 &
wait; t tests+warm
timeout 120 ./kernels.test -test.run '^$' -test.bench PrefillPieces -test.benchtime 1x 2>&1 | tee $OUT/pieces.log; t pieces
for i in 1 2; do
  timeout 60 ./gpu-base.test -test.run '^$' -test.bench "$AB" -test.benchtime 50x 2>&1 | tee $OUT/ab_base_$i.log; t base$i
  timeout 60 ./gpu.test -test.run '^$' -test.bench "$AB" -test.benchtime 50x 2>&1 | tee $OUT/ab_new_$i.log; t new$i
done
timeout 90 ./gpu.test -test.run '^$' -test.bench '^BenchmarkQuantLinearLayout$/./x/^T=(64|2048)$' -test.benchtime 20x 2>&1 | tee $OUT/rows.log; t rows
timeout 60 ./gpu.test -test.run '^$' -test.bench '^BenchmarkQuantLinearLayout$/fp16/x/^T=512$' -test.benchtime 50x 2>&1 | tee -a $OUT/rows.log; t fp16
grep -E "^(--- FAIL|ok|FAIL|PASS|rc=)" $OUT/tests.log
