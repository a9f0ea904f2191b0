#!/bin/bash
# Session 5 call 9: ncu of pack v4 (int4 KC, one block per head of 1 and of 128 sequences) and of the (1, 8K) int4 KT decode step with the fused merge.
# carry: [".gpu/s5c"]
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz; chmod +x bitdecode
R=$OUT/r; mkdir -p $R
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section InstructionStats"
for g in 1x8192 128x8192; do
  timeout 120 ncu --kernel-name regex:"pack_block" --launch-skip 1 --launch-count 1 $S ./bitdecode bench attn --device cuda --kv int4 --grid $g --reps 3 > $R/ncu_pack_int4_$g.txt 2>&1; echo "rc=$?" >> $R/ncu_pack_int4_$g.txt
done
timeout 120 ncu --kernel-name regex:"decode_" --launch-skip 6 --launch-count 1 $S ./bitdecode bench attn --device cuda --kv int4:kt128 --grid 1x8192 --reps 3 > $R/ncu_decode_int4kt_1x8192.txt 2>&1; echo "rc=$?" >> $R/ncu_decode_int4kt_1x8192.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
