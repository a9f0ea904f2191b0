#!/bin/bash
# Session 7 (attn) call 2: v2.7 with int2 at MT 8 / registers uncapped: decode_mma reference tests (every
# spec, shape, ragged lengths, Tq 1 and 3, determinism), mma vs wgmma side by side for int4 KT and int8
# over the 8-row grid (the picker), ncu of mma int2 and int4 at 16x32K.
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
timeout 150 ./kernels.test -test.run 'TestGPUDecodeMatchesReference/mma' -test.v > $R/test_decode_mma.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_decode_mma.log
tail -4 $R/test_decode_mma.log
G8=1x8192,1x32768,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192
timeout 75 ./bitdecode bench attn --device cuda --kernel mma,wgmma --kv int4:kt128,int8 --grid $G8 > $R/sbs_kt_int8.md 2> $R/sbs_kt_int8.log; echo "rc=$? t=$SECONDS" >> $R/sbs_kt_int8.log
cat $R/sbs_kt_int8.log
for kvs in int2 int4; do
  left=$((285 - SECONDS)); [ $left -gt 30 ] && left=30
  timeout $left ncu --kernel-name regex:"decode_" --launch-skip 6 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats \
    ./bitdecode bench attn --device cuda --kernel mma --kv $kvs --grid 16x32768 --reps 1 > $R/ncu_16x32k_mma_$kvs.txt 2>&1; echo "rc=$? t=$SECONDS" >> $R/ncu_16x32k_mma_$kvs.txt
  grep -E "Registers Per|Achieved Occupancy|No Eligible|Issued Warp|Memory Throughput|DRAM Through|Eligible Warps|Executed Ipc|rc=" $R/ncu_16x32k_mma_$kvs.txt | head -12
done
tar czf $OUT/results.tgz -C $OUT r
