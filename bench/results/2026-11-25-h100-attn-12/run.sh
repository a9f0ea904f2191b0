#!/bin/bash
# Session 12 (s10-i2) call: decode_mma v2.12 against main, issue #19 item 1.
# carry: [".gpu-i2"]: bitdecode_main (/work/main 967060d), bitdecode and kernels.test (branch
# s10-i2). Tests in the background (new binary); the A/B alternated twice, one process per run
# over the four formats (main, new, main, new).
cd "$(dirname "$0")"
R=/tmp/r; rm -rf $R; mkdir -p $R; cp run.sh $R/
snap() { tar czf $OUT/results.tgz -C /tmp r; }
chmod +x bitdecode bitdecode_main kernels.test
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
(timeout 200 ./kernels.test -test.run '^TestGPUDecodeMatchesReference$/^mma$' -test.v > $R/t_ref_mma.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/t_ref_mma.log) &
(timeout 200 ./kernels.test -test.run '^(TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline)$' -test.v > $R/t_long_ring.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/t_long_ring.log) &
B="bench attn --device cuda --kernel auto --kv int2,k4v2,int4,int4:kt128 --grid 1x8192,1x131072,16x32768,32x8192,128x8192"
run() {  # name, env... and command: one bench run, its table, log and JSON
  local n=$1; shift
  env "$@" $B --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log; tail -1 $R/$n.log; snap
}
last=0
step() {  # a run only if one as long as the last still ends by 208 s
  local s=$SECONDS
  if [ $((SECONDS + last)) -ge 208 ]; then echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return; fi
  local n=$1; shift
  run $n "$@" timeout $((212 - SECONDS)) "${BIN[@]}"
  last=$((SECONDS - s))
}
BIN=(./bitdecode_main); step main1
BIN=(./bitdecode); step new1 BITDECODE_PTXAS_VERBOSE=1
BIN=(./bitdecode_main); step main2
BIN=(./bitdecode); step new2
wait
echo "t=$SECONDS"
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/t_*.log | grep -v -- '--- PASS: TestGPUDecodeMatchesReference/mma/' | tail -12
snap
