#!/bin/bash
# s7-bwmass's one device call (2026-11-25): the sampled attention mass (kN) and the live launches.
# Run from the repo root with .gpu-bwmass/ carried (bundle.tar.xz: bitdecode and the test
# binaries of branch s7-bwmass, bitdecode-old of main 7de578c, gocoder-23m).
set -o pipefail
cd .gpu-bwmass; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode bitdecode-old *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
# Tests (in parallel): the planes kernel with the sampled mass (tensor-core kernel), the GPU cache.
(timeout 80 ./kernels.test -test.v -test.timeout 78s -test.run '^TestGPUPlanesMatchesReference$/^mma$' > $R/kernels_planes.log 2>&1; echo "rc=$?" >> $R/kernels_planes.log) &
(timeout 80 ./gpukv.test -test.v -test.timeout 78s -test.run '^(TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneCacheMatchesReference|TestGPUPlaneCacheGolden|TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneScheduler|TestLiveBound)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
wait; t tests; snap
# Engine step, Llama-3.1-8B shapes, 1 x 32K: the mass on every step (k1), one in 4, one in 16.
timeout 45 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --steps 64 --kv bw:h20:m40:l40,bw:h20:m40:l40:k16,bw:h20:m40:l40:k4 --json $R/model.json > $R/model.log 2>&1; echo "rc=$?" >> $R/model.log
t model; snap
# Kernel level, one layer: the grid of bench/results/2026-11-25-h100-bw-3, new (k16 rows: the same
# timings, the share per step divided by 16) then old (main's binary).
timeout 40 ./bitdecode bench attn --device cuda --kv bw:h20:m40:l40:k16,bw:m100:w0:s0:k16 --grid 1x8192,1x131072,16x32768,128x8192 --json $R/attn_new.json > $R/attn_new.md 2> $R/attn_new.log; echo "rc=$?" >> $R/attn_new.log
t attn_new; snap
timeout 40 ./bitdecode-old bench attn --device cuda --kv bw:h20:m40:l40,bw:m100:w0:s0 --grid 1x8192,1x131072,16x32768,128x8192 --json $R/attn_old.json > $R/attn_old.md 2> $R/attn_old.log; echo "rc=$?" >> $R/attn_old.log
t attn_old; snap
timeout 25 ./bitdecode-old bench model --ctx 32k --batch 1 --no-linears --steps 64 --kv bw:h20:m40:l40 --json $R/model_old.json > $R/model_old.log 2>&1; echo "rc=$?" >> $R/model_old.log
t model_old; snap
