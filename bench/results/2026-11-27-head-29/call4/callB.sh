#!/bin/bash
# Session 29 call 6b: gocoder-23m's GPU tests on the session's final tree (the int8 head and its tied lookup,
# prefill.cu v4 in the golden and DEC tests); the checkpoint's first half came in call 6a.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29b; W=/tmp/w; mkdir -p $W/gc
ls -la /tmp/gcparts || { echo "no first half: not the warm machine"; exit 1; }
cat /tmp/gcparts/part1 $P/part2 | sha256sum | cut -c1-16
cat /tmp/gcparts/part1 $P/part2 | xz -dc > $W/gc/model.safetensors; cp $P/gc/*.json $W/gc/
for f in gpu.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc BITDECODE_GOCODER_DIR=$W/gc
( cd $R/backend/gpu && timeout 400 $W/gpu.test -test.run 'TestModelQuantMatchesCPU|TestModelDECMatchesCPU|TestModelMatchesCPU' -test.v -test.timeout 400s > $OUT/t1.log 2>&1; echo "t1 rc $? at $SECONDS s" ) &
PIDS="$!"
( cd $R/kvcache/gpukv && timeout 400 $W/gpukv.test -test.run 'TestGPUModelDECLists|TestGPUCacheGolden|TestGPUGreedyTokens' -test.v -test.timeout 400s > $OUT/t2.log 2>&1; echo "t2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^    --- \|^ok\|^FAIL\|^PASS\|panic\|golden\|worst" $OUT/t1.log $OUT/t2.log | head -70
echo "end at $SECONDS s"
