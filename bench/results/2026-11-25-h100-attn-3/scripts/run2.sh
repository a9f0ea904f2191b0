#!/bin/bash
# Session 8 (attn) call 2: the 8-row grid side by side, int8 K·q (v2.8, the default) against the fp16
# scores (BITDECODE_DECODE_QK8=0), --kernel auto, decode_mma's new 512-token minimum split in both; then
# the long-sequence and decode_mma reference tests on the final defaults with the time left.
# carry: [".gpu-attn"] (bitdecode, kernels.test built from branch s6-attn)
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
G8=1x8192,1x32768,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192
for q in 1 0; do
  BITDECODE_DECODE_QK8=$q timeout 118 ./bitdecode bench attn --device cuda --kernel auto --kv int2,k4v2,int4,int4:kt128 --grid $G8 --json $R/grid_qk8_$q.json > $R/grid_qk8_$q.md 2> $R/grid_qk8_$q.log; echo "rc=$? t=$SECONDS" >> $R/grid_qk8_$q.log
  grep -c ' us ' $R/grid_qk8_$q.log; tail -1 $R/grid_qk8_$q.log
done
left=$((264 - SECONDS))
echo "tests with $left s left"
if [ $left -gt 15 ]; then
  timeout $left ./kernels.test -test.run '^TestGPUDecodeLong$' -test.v > $R/test_long.log 2>&1 &
  timeout $left ./kernels.test -test.run 'TestGPUDecodeMatchesReference/^mma$' -test.v > $R/test_mma.log 2>&1 &
  wait
fi
echo "t=$SECONDS"; grep -h -- '--- \|^ok\|FAIL' $R/test_long.log $R/test_mma.log | tail -6; grep -c 'score term' $R/test_mma.log
tar czf $OUT/results.tgz -C $OUT r
