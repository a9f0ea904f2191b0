#!/bin/bash
# Session 9 (int2) call 1: v2.9 int8 P·V (BITDECODE_DECODE_PV8=1) against fp16 P·V (=0), one binary.
# Tests (PV8=1): the decode_mma reference test and, under compute-sanitizer memcheck (decode_mma
# kernels), TestGPUDecodeLong, in parallel with the grid (their GPU work is small and sporadic).
# carry: [".gpu-int2"] (bitdecode, kernels.test built from branch s6-int2)
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
cp run1.sh $R/
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
(BITDECODE_DECODE_PV8=1 timeout 195 ./kernels.test -test.run '^TestGPUDecodeMatchesReference$/^mma$' -test.v > $R/test_mma.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_mma.log) &
(BITDECODE_DECODE_PV8=1 timeout 195 compute-sanitizer --tool memcheck --kernel-name kns=decode_mma ./kernels.test -test.run '^TestGPUDecodeLong$' -test.v > $R/memcheck_long.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/memcheck_long.log) &
G=1x8192,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192
for v in 1 0; do
  BITDECODE_DECODE_PV8=$v timeout 85 ./bitdecode bench attn --device cuda --kernel auto --kv int2,k4v2 --grid $G --json $R/grid_pv8_$v.json > $R/grid_pv8_$v.md 2> $R/grid_pv8_$v.log; echo "rc=$? t=$SECONDS" >> $R/grid_pv8_$v.log
  tail -2 $R/grid_pv8_$v.log
done
wait
echo "t=$SECONDS"
grep -h -- '--- \|^ok\|FAIL\|rc=' $R/test_mma.log $R/memcheck_long.log | tail -12
grep -h 'P·V' $R/test_mma.log | sort | uniq -c | sort -rn | head -3
grep -h 'ERROR SUMMARY' $R/memcheck_long.log
tar czf $OUT/results.tgz -C $OUT r
