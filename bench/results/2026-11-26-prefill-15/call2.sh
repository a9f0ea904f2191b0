#!/bin/bash
# Session 15e call 2 (H100): the GPU tests the change touches (the dequantization over both layouts
# in both forms, the packed Linear at every T through the backend, the quantized model against the
# CPU), three processes in parallel; then the read ceiling with the dequantization pieces, and one
# more A B of BenchmarkQuantLinearLayout at T = 512 (main's gpu.test, then this branch's).
# Run from the repo root with .gpu-prefill carried.
set -o pipefail
cd .gpu-prefill; chmod +x *.test
export BITDECODE_CACHE_DIR=$PWD/cache
t() { date -u +%T" $*" | tee -a $OUT/times.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $OUT/times.txt
t start
tst() { (timeout 170 ./$2 -test.v -test.timeout 170s -test.run "$3" > $OUT/$1.log 2>&1; echo "rc=$?" >> $OUT/$1.log) & }
tst kref kernels.test '^TestGEMVQMatchesReference$'
tst ktiled kernels.test '^(TestGEMVQTiledMatchesWQ|TestPackTilesMatchesWQ|TestGEMVQ6MatchesV5)$'
tst backend gpu.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestModelQuantMatchesCPU|TestModelMatchesCPU)$'
wait; t tests
timeout 60 ./kernels.test -test.run '^$' -test.bench '^BenchmarkPrefillPieces$/^dequant$' -test.benchtime 1x 2>&1 | tee $OUT/pieces2.log; t pieces
AB='^BenchmarkQuantLinearLayout$/int/x/^T=512$'
timeout 60 ./gpu-base.test -test.run '^$' -test.bench "$AB" -test.benchtime 50x 2>&1 | tee $OUT/ab_base_3.log; t base3
timeout 60 ./gpu.test -test.run '^$' -test.bench "$AB" -test.benchtime 50x 2>&1 | tee $OUT/ab_new_3.log; t new3
for f in kref ktiled backend; do echo "== $f"; grep -E "^(--- FAIL|FAIL|ok|PASS|rc=)|^--- PASS" $OUT/$f.log; done
