#!/bin/bash
# Session 5 call 1: v2.6 (two-instruction unpack, edge-only masking): decode tests, A/B against HEAD eee341a, int8 MINB sweep, ncu at 16x32K.
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz bitdecode_old.xz gpu_kernels.test.xz; chmod +x bitdecode bitdecode_old gpu_kernels.test
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt 2>&1
timeout 200 ./gpu_kernels.test -test.run 'TestGPUDecodeMatchesReference' -test.v > $R/test_decode.log 2>&1; echo "rc=$?" >> $R/test_decode.log
G=1x8192,16x32768,128x8192
for b in bitdecode_old bitdecode; do
  timeout 120 ./$b bench attn --device cuda --kernel mma,wgmma --kv int8,int4,int4:kt128,int2 --grid $G --json $R/ab_$b.json > $R/ab_$b.md 2> $R/ab_$b.log; echo "rc=$?" >> $R/ab_$b.log
done
for mb in 1 2; do
  BITDECODE_WGMMA_MINB=$mb timeout 40 ./bitdecode bench attn --device cuda --kernel wgmma --kv int8,int4:kt128 --grid $G > $R/minb$mb.md 2> $R/minb$mb.log
done
for spec in "mma int2" "mma int4" "wgmma int4:kt128"; do set -- $spec
  timeout 60 ncu --kernel-name regex:"decode_" --launch-skip 6 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    ./bitdecode bench attn --device cuda --kernel $1 --kv $2 --grid 16x32768 --reps 1 > $R/ncu_16x32k_$1_${2/:/_}.txt 2>&1; echo "rc=$?" >> $R/ncu_16x32k_$1_${2/:/_}.txt
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
