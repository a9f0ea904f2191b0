#!/bin/bash
# Session 26 (attn-20) call 1: measure before designing. The timeline build
# (BITDECODE_DECODE_TIMELINE=1, with this session's merge sub-phases and the
# per-SM summary; every CTA's record appended as CSV) at 1 x 8K / 32K / 128K for
# int4 and int2; ncu (source counters: where the merging CTA's warps stall) of
# int4 1 x 8K; then the plain build on the brief's grid (the default kernel's
# SASS is main's: checked with NVRTC 12.5 here).
set -o pipefail
D=$PWD/.gpu-attn
B=$D/bitdecode
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_TIMELINE_CSV=$OUT/tl.csv timeout 150 $B bench attn --device cuda --kv int4,int2 --grid 1x8192,1x32768,1x131072 > $OUT/tl.md 2>&1
echo "tl rc=$? $(el)s" >> $OUT/times.txt
xz -9 $OUT/tl.csv
left=$(( 200 - $(el) ))
if command -v ncu >/dev/null && [ $left -gt 40 ]; then
  timeout $left ncu -k regex:decode_mma --launch-skip 10 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis -o $OUT/ncu8k -f $B bench attn --device cuda --kv int4 --grid 1x8192 > $OUT/ncu8k.log 2>&1
  echo "ncu rc=$? $(el)s" >> $OUT/times.txt
  ( ncu -i $OUT/ncu8k.ncu-rep --page source --csv --print-source sass > $OUT/ncu8k_sass.csv 2>&1 || ncu -i $OUT/ncu8k.ncu-rep --page details > $OUT/ncu8k_sass.csv 2>&1 ); xz -9 $OUT/ncu8k_sass.csv
  ncu -i $OUT/ncu8k.ncu-rep --page details >> $OUT/ncu8k.log 2>&1
  echo "ncu print $(el)s" >> $OUT/times.txt
  xz -9 $OUT/ncu8k.ncu-rep
fi
left=$(( 285 - $(el) ))
[ $left -gt 30 ] && timeout $left $B bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x32768,1x131072,32x8192,128x8192 > $OUT/plain.md 2>&1
echo "plain rc=$? $(el)s" >> $OUT/times.txt
cat $OUT/times.txt $OUT/gpu.txt
grep -h 'read ceiling\|^| int\|^| k4' $OUT/plain.md | head -20
grep -h -A3 'per-SM\|^timeline' $OUT/tl.md | grep -v '^--' | head -40
