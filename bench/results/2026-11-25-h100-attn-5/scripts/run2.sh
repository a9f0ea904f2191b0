#!/bin/bash
# Session 10 (attn) call 2 (call 1 failed: redO was not 16-byte aligned for the parked query): decode_mma v2.10 (KC query parked in shared memory under a 3+ CTA
# register cap). carry: [".gpu-attn"]: bitdecode.old (/work/main HEAD 7de578c), bitdecode and
# kernels.test (branch s7-attn). The new binary's default kernels have v2.9's SASS (NVRTC 11.8
# check), so the A/B is old (defaults) against new with BITDECODE_DECODE_MINB/MT, per format in turn.
# Tests (in the background, new binary): the decode_mma reference test under both candidate caps,
# and memcheck on TestGPUDecodeLong (its int2 case) under the (3, 4) cap.
cd "$(dirname "$0")"
R=/tmp/r; rm -rf $R; mkdir -p $R
cp run2.sh $R/
snap() { tar czf $OUT/results.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T='-test.run ^TestGPUDecodeMatchesReference$/^mma$ -test.v'
(BITDECODE_DECODE_MINB=3 BITDECODE_DECODE_MT=4 timeout 200 ./kernels.test $T > $R/test_mma_b3mt4.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_mma_b3mt4.log) &
(BITDECODE_DECODE_MINB=4 BITDECODE_DECODE_MT=2 timeout 200 ./kernels.test $T > $R/test_mma_b4mt2.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/test_mma_b4mt2.log) &
(BITDECODE_DECODE_MINB=3 BITDECODE_DECODE_MT=4 timeout 200 compute-sanitizer --tool memcheck --kernel-name kns=decode_mma ./kernels.test -test.run '^TestGPUDecodeLong$' -test.v > $R/memcheck_long.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/memcheck_long.log) &
G=1x8192,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192
B="bench attn --device cuda --kernel auto --grid $G"
run() {  # name, env..., -- , bench args
  local n=$1; shift
  env "$@" > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log; tail -1 $R/$n.log; snap
}
for f in int2 k4v2 int4; do
  run old_$f timeout 40 ./bitdecode.old $B --kv $f --json $R/old_$f.json
  run b3mt4_$f BITDECODE_DECODE_MINB=3 BITDECODE_DECODE_MT=4 timeout 40 ./bitdecode $B --kv $f --json $R/b3mt4_$f.json
done
[ $SECONDS -lt 190 ] && run b4mt2_int2 BITDECODE_DECODE_MINB=4 BITDECODE_DECODE_MT=2 timeout 40 ./bitdecode $B --kv int2 --json $R/b4mt2_int2.json
[ $SECONDS -lt 212 ] && run old2_int2 timeout 36 ./bitdecode.old $B --kv int2 --json $R/old2_int2.json
wait
echo "t=$SECONDS"
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/test_*.log $R/memcheck_long.log | grep -v -- '--- PASS: TestGPUDecodeMatchesReference/mma/' | tail -12
grep -h 'ERROR SUMMARY' $R/memcheck_long.log
snap
