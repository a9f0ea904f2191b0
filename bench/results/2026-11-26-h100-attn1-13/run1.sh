#!/bin/bash
# Session 19 call 1: the launch timeline (BITDECODE_DECODE_TIMELINE=1) and ncu of int4 1 x 32K.
set -o pipefail
B=.gpu-attn1/bitdecode
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
BITDECODE_DECODE_TIMELINE=1 timeout 70 $B bench attn --device cuda --kernel mma --kv int4,int2 --grid 1x8192,1x32768,1x131072 > $OUT/tl_1seq.md 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/times.txt
BITDECODE_DECODE_TIMELINE=1 timeout 50 $B bench attn --device cuda --kernel mma --kv int4 --grid 128x8192 > $OUT/tl_128.md 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/times.txt
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_FUSE=0 timeout 40 $B bench attn --device cuda --kernel mma --kv int4 --grid 1x8192,1x32768 > $OUT/tl_nofuse.md 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/times.txt
if command -v ncu >/dev/null; then
  left=$(( 235 - ($(date +%s)-t0) ))
  [ $left -gt 30 ] && timeout $left ncu -k regex:decode_mma --launch-skip 20 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats $B bench attn --device cuda --kernel mma --kv int4 --grid 1x32768 > $OUT/ncu_int4_32k.txt 2>&1; echo "ncu rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/times.txt
else
  echo "no ncu" >> $OUT/times.txt
fi
