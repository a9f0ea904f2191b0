#!/bin/bash
# s12-b1s call 1 (2026-11-26): decode_mma.cu at one sequence. One binary (main's tree), every variant
# by environment, alternated with the default: split counts (v2's target rule), the min split, the
# cp.async ring (2 and 3 CTAs an SM), MT, MINB, the merge in its own launch; then ncu of one int4
# 1 x 32K launch (occupancy, warp states, DRAM) fused and unfused. Run from the repo root with
# .gpu-b1s carried (b/bitdecode).
set -o pipefail
TEND=${TEND:-135}
cd .gpu-b1s/b; R=$OUT/r; mkdir -p $R; cp ../run1.sh $R/ 2>/dev/null
chmod +x bitdecode
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
K=int4,int4:kt128,int2,k4v2
G3=1x8192,1x32768,1x131072
step() { # name env
  local n=$1 e=$2; fits $n || return 0
  local s=$SECONDS
  env $e timeout $((TEND + 5 - SECONDS)) ./bitdecode bench attn --device cuda --kv $K --grid $G3 > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS env=$e" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
prof() { # name env sections...
  fits $1 || return 0
  local n=$1 e=$2 s=$SECONDS; shift 2
  env $e timeout $((TEND + 5 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_ --launch-skip 6 --launch-count 2 "$@" \
    ./bitdecode bench attn --device cuda --kv int4 --grid 1x32768 > $R/$n.txt 2>&1; echo "rc=$?" >> $R/$n.txt
  last=$((SECONDS - s)); t $n; snap
}
step def1 X=0
step ms256 BITDECODE_DECODE_MINSPLIT=256
step s3 BITDECODE_DECODE_STAGES=3
step r1 "BITDECODE_DECODE_STAGES=3 BITDECODE_DECODE_MINB=3"
step t128 BITDECODE_DECODE_SPLITS=target:128
step t512 "BITDECODE_DECODE_SPLITS=target:512 BITDECODE_DECODE_MINSPLIT=128"
step def2 X=0
prof ncu_def X=0 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats
prof ncu_nofuse BITDECODE_DECODE_FUSE=0 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
step mt8 BITDECODE_DECODE_MT=8
step r3 "BITDECODE_DECODE_STAGES=2 BITDECODE_DECODE_MINB=3 BITDECODE_DECODE_MT=8"
step s4 BITDECODE_DECODE_STAGES=4
step r1ms "BITDECODE_DECODE_STAGES=3 BITDECODE_DECODE_MINB=3 BITDECODE_DECODE_MINSPLIT=256"
step t384 BITDECODE_DECODE_SPLITS=target:384
step def3 X=0
step fuse0 BITDECODE_DECODE_FUSE=0
step mt2 BITDECODE_DECODE_MT=2
step minb3 BITDECODE_DECODE_MINB=3
step def4 X=0
t end; snap
grep -H "^| auto" $R/*.md | sed "s/| 32\/8\/128 | 0//" | cut -c1-150; grep -h "gpu__time_duration\|Achieved Occ\|Long Scoreboard\|DRAM Throughput\|Warp Cycles Per Issued\|decode_" $R/ncu_*.txt | cut -c1-150 | head -40; cat $R/times.txt $R/skipped.txt 2>/dev/null
