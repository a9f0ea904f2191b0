#!/bin/bash
# Session 5 call 10: pack.cu v5 (chunk-oriented group min/max with shuffles and shared integer atomics on ordered keys,
# word-oriented codes from contiguous staged runs): bitwise tests, engine GPU tests, sanitizers, pack column, ncu at 1024 heads.
# carry: [".gpu/s5", ".gpu/m5"]
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz engine.test.xz gpu_kernels.test.xz; chmod +x bitdecode engine.test gpu_kernels.test
R=$OUT/r; mkdir -p $R
export BITDECODE_GOCODER_DIR=$(cd ../m5 && pwd)
timeout 120 ./gpu_kernels.test -test.run 'TestGPUPack' -test.v > $R/test_pack.log 2>&1; echo "rc=$?" >> $R/test_pack.log
timeout 120 ./engine.test -test.run 'TestGPUCache|TestGPUScheduler' -test.v > $R/test_engine_gpu.log 2>&1; echo "rc=$?" >> $R/test_engine_gpu.log
timeout 60 compute-sanitizer --tool memcheck --kernel-name kns=pack_ ./engine.test -test.run '^TestGPUCacheMatchesReference$|^TestGPUCacheBatchInvariant$' > $R/memcheck_pack.txt 2>&1; echo "rc=$?" >> $R/memcheck_pack.txt
timeout 60 compute-sanitizer --tool racecheck --kernel-name kns=pack_ ./engine.test -test.run '^TestGPUCacheMatchesReference$' > $R/racecheck_pack.txt 2>&1; echo "rc=$?" >> $R/racecheck_pack.txt
timeout 90 ./bitdecode bench attn --device cuda --kernel auto --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,16x32768,128x8192 --json $R/pack_rows.json > $R/pack_rows.md 2> $R/pack_rows.log; echo "rc=$?" >> $R/pack_rows.log
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section InstructionStats"
for g in 1x8192 128x8192; do
  timeout 60 ncu --kernel-name regex:"pack_block" --launch-skip 1 --launch-count 1 $S ./bitdecode bench attn --device cuda --kv int4 --grid $g --reps 3 > $R/ncu_pack_int4_$g.txt 2>&1; echo "rc=$?" >> $R/ncu_pack_int4_$g.txt
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
