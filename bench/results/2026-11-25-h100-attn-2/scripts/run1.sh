#!/bin/bash
# Session 7 (attn) call 1: A/B of decode_mma v2.7 against HEAD e6ca35b (bitdecode_old), int2 tile/register
# sweep, int4 KT mma vs wgmma; then decode tests and sanitizers of v2.7 in parallel.
# carry: [".gpu-attn"] (bitdecode, bitdecode_old, kernels.test)
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
G=1x8192,16x32768,128x8192
for b in bitdecode_old bitdecode; do
  timeout 60 ./$b bench attn --device cuda --kernel mma --kv int4,int4:kt128,int2,k4v2 --grid $G > $R/ab_$b.md 2> $R/ab_$b.log; echo "rc=$? t=$SECONDS" >> $R/ab_$b.log
  cat $R/ab_$b.md; tail -1 $R/ab_$b.log
done
for cfg in "2 4" "3 2" "2 8"; do set -- $cfg
  BITDECODE_DECODE_MINB=$1 BITDECODE_DECODE_MT=$2 timeout 25 ./bitdecode bench attn --device cuda --kernel mma --kv int2 --grid $G > $R/sweep_int2_minb$1_mt$2.md 2>&1; echo "rc=$? t=$SECONDS" >> $R/sweep_int2_minb$1_mt$2.md
  grep -v '^$' $R/sweep_int2_minb$1_mt$2.md | tail -6
done
timeout 25 ./bitdecode bench attn --device cuda --kernel mma,wgmma --kv int4:kt128 --grid $G > $R/sbs_kt.md 2>&1; echo "rc=$? t=$SECONDS" >> $R/sbs_kt.md
grep -v '^$' $R/sbs_kt.md | tail -8
left=$((285 - SECONDS))
timeout $left ./kernels.test -test.run 'TestGPUDecodeMatchesReference/mma|TestGPUDecodeLong' -test.v > $R/test_decode.log 2>&1 &
timeout $left compute-sanitizer --tool memcheck --kernel-name kns=decode_mma ./kernels.test -test.run 'TestGPUDecodeLong' > $R/memcheck.txt 2>&1 &
timeout $left compute-sanitizer --tool racecheck --kernel-name kns=decode_mma ./kernels.test -test.run 'TestGPUDecodeLong' > $R/racecheck.txt 2>&1 &
wait
echo "t=$SECONDS"; tail -3 $R/test_decode.log; tail -4 $R/memcheck.txt $R/racecheck.txt
tar czf $OUT/results.tgz -C $OUT r
