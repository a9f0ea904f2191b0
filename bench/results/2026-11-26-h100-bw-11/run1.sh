#!/bin/bash
# s11-bw's first device call, 2026-11-26: the mix h20:m40:l40 under split_mma v2.8 (main 3868dca's
# binary, bitdecode_main) with the planner's knobs: warp and split weights and LOW tiles
# (BITDECODE_PLANES_WEIGHTS, BITDECODE_PLANES_MT), to pick the mixes' plan. Stays under ~66 s.
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/*
GRID=1x131072,16x32768,128x8192
bench() {
  name=$1; shift
  left=$((64 - SECONDS)); if [ $left -lt 6 ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/bitdecode_main bench attn --device cuda --kv bw:h20:m40:l40 --grid $GRID --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name $*"; snap
}
bench base
bench mt124_w421 BITDECODE_PLANES_MT=1,2,4 BITDECODE_PLANES_WEIGHTS=4,2,1
bench w211 BITDECODE_PLANES_WEIGHTS=2,1,1
bench mt124_w632 BITDECODE_PLANES_MT=1,2,4 BITDECODE_PLANES_WEIGHTS=6,3,2
bench w843 BITDECODE_PLANES_WEIGHTS=8,4,3
bench mt124_w532 BITDECODE_PLANES_MT=1,2,4 BITDECODE_PLANES_WEIGHTS=5,3,2
stamp end; snap
