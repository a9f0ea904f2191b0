#!/bin/bash
# Session 8 (attn) call 1: decode_mma v2.8 (K·q on int8 tensor cores) against the fp16 scores
# (BITDECODE_DECODE_QK8=0/1, same binary) at three rows; a 512-token minimum split for wgmma int4 KT
# at 1 x 8K; then the decode tests (int8 path by default, fp16 path forced) and memcheck in parallel.
# carry: [".gpu-attn"] (bitdecode, kernels.test built from branch s6-attn)
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
G=1x8192,16x32768,128x8192
for q in 0 1; do
  BITDECODE_DECODE_QK8=$q timeout 60 ./bitdecode bench attn --device cuda --kernel mma --kv int2,k4v2,int4,int4:kt128 --grid $G > $R/ab_qk8_$q.md 2> $R/ab_qk8_$q.log; echo "rc=$? t=$SECONDS" >> $R/ab_qk8_$q.log
  tail -13 $R/ab_qk8_$q.log
done
for m in 256 512; do
  BITDECODE_DECODE_MINSPLIT=$m timeout 20 ./bitdecode bench attn --device cuda --kernel wgmma --kv int4:kt128 --grid 1x8192 > $R/wg_minsplit$m.md 2> $R/wg_minsplit$m.log; echo "rc=$? t=$SECONDS" >> $R/wg_minsplit$m.log
  BITDECODE_DECODE_MINSPLIT=$m timeout 30 ./bitdecode bench attn --device cuda --kernel mma --kv int2,k4v2,int4,int4:kt128 --grid 1x8192 > $R/mma_minsplit$m.md 2> $R/mma_minsplit$m.log; echo "rc=$? t=$SECONDS" >> $R/mma_minsplit$m.log
  tail -2 $R/wg_minsplit$m.log; tail -5 $R/mma_minsplit$m.log
done
left=$((262 - SECONDS))
echo "tests with $left s left"
timeout $left ./kernels.test -test.run 'TestGPUDecodeMatchesReference/mma|TestGPUDecodeLong' -test.v > $R/test_qk8.log 2>&1 &
BITDECODE_DECODE_QK8=0 timeout $left ./kernels.test -test.run 'TestGPUDecodeMatchesReference/mma' > $R/test_fp16.log 2>&1 &
timeout $left compute-sanitizer --tool memcheck --kernel-name kns=decode_mma ./kernels.test -test.run 'TestGPUDecodeLong' > $R/memcheck.txt 2>&1 &
wait
echo "t=$SECONDS"; tail -3 $R/test_qk8.log $R/test_fp16.log; tail -4 $R/memcheck.txt
grep -o 'score term / fp16 query term <= [0-9.e+-]*' $R/test_qk8.log | sort -t'=' -k2 -g | tail -3
tar czf $OUT/results.tgz -C $OUT r
