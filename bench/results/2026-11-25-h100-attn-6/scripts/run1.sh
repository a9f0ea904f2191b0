#!/bin/bash
# Session 11 (ring) call 1: decode_mma v2.11, the cp.async ring (BITDECODE_DECODE_STAGES > 0).
# carry: [".gpu-ring"]: bitdecode.old (/work/main HEAD eb3bc9d), bitdecode and kernels.test
# (branch s7-ring). The new binary's defaults are v2.9's register pipeline (SASS identical here),
# so the A/B is old against new with BITDECODE_DECODE_STAGES/MT/MINB, per format in turn:
#   r1 = (STAGES 3, MT 4, MINB 3): 3 CTAs per SM; r2 = (STAGES 3): MT default, 2 CTAs.
# Tests (background, new binary): the reference test under r1 and r2, the ring-vs-pipeline
# bitwise test, memcheck on TestGPUDecodeLong (its int2 case) under r1.
cd "$(dirname "$0")"
R=/tmp/r; rm -rf $R; mkdir -p $R
cp run1.sh $R/ 2>/dev/null
snap() { tar czf $OUT/results.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T='-test.run ^TestGPUDecodeMatchesReference$/^mma$ -test.v'
R1='BITDECODE_DECODE_STAGES=3 BITDECODE_DECODE_MT=4 BITDECODE_DECODE_MINB=3'
(env $R1 timeout 215 ./kernels.test $T > $R/test_mma_r1.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_mma_r1.log) &
(BITDECODE_DECODE_STAGES=3 timeout 215 ./kernels.test $T > $R/test_mma_r2.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_mma_r2.log) &
(timeout 215 ./kernels.test -test.run '^TestGPUDecodeRingMatchesPipeline$' -test.v > $R/test_ring_bits.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_ring_bits.log) &
(env $R1 timeout 215 compute-sanitizer --tool memcheck --kernel-name kns=decode_mma ./kernels.test -test.run '^TestGPUDecodeLong$' -test.v > $R/memcheck_long.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/memcheck_long.log) &
G=1x8192,1x131072,16x32768,32x8192,128x8192
B="bench attn --device cuda --kernel auto --grid $G"
run() {  # name, env..., command
  local n=$1; shift
  env "$@" > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log; tail -1 $R/$n.log; snap
}
for f in int2 k4v2 int4; do
  [ $SECONDS -lt 190 ] && run old_$f timeout 35 ./bitdecode.old $B --kv $f --json $R/old_$f.json
  [ $SECONDS -lt 190 ] && run r1_$f $R1 BITDECODE_PTXAS_VERBOSE=1 timeout 35 ./bitdecode $B --kv $f --json $R/r1_$f.json
  [ $SECONDS -lt 190 ] && run r2_$f BITDECODE_DECODE_STAGES=3 BITDECODE_PTXAS_VERBOSE=1 timeout 35 ./bitdecode $B --kv $f --json $R/r2_$f.json
done
[ $SECONDS -lt 195 ] && run old2_int2 timeout 30 ./bitdecode.old $B --kv int2 --json $R/old2_int2.json
[ $SECONDS -lt 200 ] && run r3_int2 BITDECODE_DECODE_STAGES=2 BITDECODE_DECODE_MINB=3 BITDECODE_PTXAS_VERBOSE=1 timeout 30 ./bitdecode $B --kv int2 --json $R/r3_int2.json
wait
echo "t=$SECONDS"
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/test_*.log $R/memcheck_long.log | grep -v -- '--- PASS: TestGPUDecodeMatchesReference/mma/' | tail -14
grep -h 'ERROR SUMMARY' $R/memcheck_long.log
snap
