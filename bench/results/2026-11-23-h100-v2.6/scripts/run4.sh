#!/bin/bash
# Session 5 call 4 (final v2.6 kernels): compute-sanitizer memcheck/racecheck on the engine's GPU decode (wgmma + fused merge + mma), decode tests.
# carry: [".gpu/s5", ".gpu/m5"]
cd "$(dirname "$0")"
xz -d -k -f engine.test.xz gpu_kernels.test.xz; chmod +x engine.test gpu_kernels.test
R=$OUT/r; mkdir -p $R
export BITDECODE_GOCODER_DIR=$(cd ../m5 && pwd)
nvidia-smi > $R/nvidia-smi.txt 2>&1; compute-sanitizer --version > $R/sanitizer_version.txt 2>&1
timeout 210 compute-sanitizer --tool memcheck ./engine.test -test.run '^TestGPUCacheBatchInvariant$|^TestGPUCacheMatchesReference$/^(fp16|int8|int4|int4:kt128|int2)$' -test.v > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt
timeout 150 compute-sanitizer --tool racecheck ./engine.test -test.run '^TestGPUCacheMatchesReference$/^(fp16|int4:kt128|int2)$' -test.v > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt
timeout 200 ./gpu_kernels.test -test.run 'TestGPUDecodeMatchesReference/(mma|wgmma)|TestGPUDecodeLong' -test.v > $R/test_decode.log 2>&1; echo "rc=$?" >> $R/test_decode.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
