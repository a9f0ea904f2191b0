#!/bin/bash
# Session 13 (s10-i2b) call: decode_mma v2.13 against main (v2.12), issue #19 item 1.
# carry: [".gpu-i2b"]: bitdecode_main (/work/main 0ff686e: v2.12), bitdecode and kernels.test
# (branch s10-i2b), xz-compressed. Tests in the background (new binary); the attention A/B
# alternated twice (main, new, main, new), one process per run over the three formats; then
# bench model at max batch (int2, 32K) for each binary.
cd "$(dirname "$0")"
R=/tmp/r; rm -rf $R; mkdir -p $R; cp run.sh $R/
snap() { tar czf $OUT/results.tgz -C /tmp r; }
for f in bitdecode bitdecode_main kernels.test; do
  python3 -c "import lzma,sys; open(sys.argv[1],'wb').write(lzma.open(sys.argv[1]+'.xz').read())" $f; chmod +x $f
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
echo "start t=$SECONDS" > $R/times.txt
(timeout 130 ./kernels.test -test.run '^TestGPUDecodeMatchesReference$/^mma$' -test.v > $R/t_ref_mma.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/t_ref_mma.log) &
(timeout 130 ./kernels.test -test.run '^(TestGPUDecodeLong|TestGPUDecodeRingMatchesPipeline)$' -test.v > $R/t_long_ring.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/t_long_ring.log) &
B="bench attn --device cuda --kernel auto --kv int2,k4v2,int4 --grid 1x8192,1x131072,16x32768,32x8192,128x8192"
run() {  # name, env... and command: one bench run, its table, log and JSON
  local n=$1; shift
  env "$@" $B --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log; tail -1 $R/$n.log; snap
}
last=0
step() {  # a run only if one as long as the last still ends by 135 s
  local s=$SECONDS
  if [ $((SECONDS + last)) -ge 135 ]; then echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return; fi
  local n=$1; shift
  run $n "$@" timeout $((150 - SECONDS)) "${BIN[@]}"
  last=$((SECONDS - s))
}
BIN=(./bitdecode_main); step main1
BIN=(./bitdecode); step new1 BITDECODE_PTXAS_VERBOSE=1
BIN=(./bitdecode_main); step main2
BIN=(./bitdecode); step new2
wait
echo "tests done t=$SECONDS" >> $R/times.txt
M="bench model --ctx 32k --kv int2 --batch max --steps 16 --no-linears"
for b in main new; do
  bin=./bitdecode; [ $b = main ] && bin=./bitdecode_main
  if [ $SECONDS -lt 160 ]; then
    timeout $((176 - SECONDS)) $bin $M --json $R/model_$b.json > $R/model_$b.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/model_$b.log
  else echo "skip model_$b t=$SECONDS" >> $R/skipped.txt; fi
  snap
done
# ncu (if time is left): the stall reasons and per-instruction samples of v2.13's int2 kernel at
# 128 x 8K, the third decode_mma launch of the process.
if [ $SECONDS -lt 150 ]; then
  timeout $((182 - SECONDS)) ncu --clock-control none -k regex:decode_mma -s 2 -c 1 --section SpeedOfLight \
    --section SchedulerStats --section WarpStateStats --section SourceCounters -o $R/prof \
    ./bitdecode bench attn --device cuda --kernel auto --kv int2 --grid 128x8192 > $R/ncu.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/ncu.log
  timeout 5 ncu -i $R/prof.ncu-rep --page details > $R/ncu_details.txt 2>&1
  timeout 5 ncu -i $R/prof.ncu-rep --page source --csv --print-source sass > $R/ncu_sass.csv 2>&1
  rm -f $R/prof.ncu-rep
else echo "skip ncu t=$SECONDS" >> $R/skipped.txt; fi
echo "t=$SECONDS"
grep -h -- '^--- \|^ok\|^FAIL\|^PASS\|rc=' $R/t_*.log | grep -v -- '--- PASS: TestGPUDecodeMatchesReference/mma/' | tail -12
grep -h "ms/step" $R/model_*.log
snap
