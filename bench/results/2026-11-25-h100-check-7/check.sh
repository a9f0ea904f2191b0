#!/bin/bash
# Lead's check of the last merges (planes v2.3, decode_mma v2.9 opt-in), session 5, 2026-11-25.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/times.txt
timeout 60 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --kv fp16,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
snap
T=130
(timeout $T ./gpukv.test -test.v -test.timeout ${T}s -test.run '^(TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference|TestGPUPlaneScheduler|TestGPUPlaneRetierMatchesPolicy|TestGPUCacheGolden)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout $T ./kernels.test -test.v -test.timeout ${T}s -test.run '^TestGPUDecodeMatchesReference$/^mma$' > $R/kernels_decode.log 2>&1; echo "rc=$?" >> $R/kernels_decode.log) &
(timeout $T ./kernels.test -test.v -test.timeout ${T}s -test.run '^(TestGPUPlanesMatchesReference|TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16)$/^mma$' > $R/kernels_planes.log 2>&1; echo "rc=$?" >> $R/kernels_planes.log) &
snap; wait; date -u >> $R/times.txt; snap
