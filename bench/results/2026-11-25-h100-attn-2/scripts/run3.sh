#!/bin/bash
# Session 7 (attn) call 3: the final grid (--kernel auto, 8 rows) of v2.7 + the new pick rule; HEAD e6ca35b
# (bitdecode_old) on the rows call 1 left out; int8 mma vs wgmma at two batched rows; a 512-token minimum
# split at the single-sequence rows. Each step runs only if the call has time left for it.
cd "$(dirname "$0")"
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
G8=1x8192,1x32768,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192
timeout 150 ./bitdecode bench attn --device cuda --kernel auto --kv int4,int4:kt128,int2,k4v2 --grid $G8 --json $R/gpu_attn.json > $R/gpu_attn.md 2> $R/gpu_attn.log; echo "rc=$? t=$SECONDS" >> $R/gpu_attn.log
cat $R/gpu_attn.log
step() {  # name, max seconds, command...
  local n=$1 m=$2; shift 2; local left=$((288 - SECONDS)); [ $left -gt $m ] && left=$m
  [ $left -lt 15 ] && { echo "$n: skipped (t=$SECONDS)"; return; }
  timeout $left "$@" > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log; cat $R/$n.log
}
step ab_old 60 ./bitdecode_old bench attn --device cuda --kernel auto --kv k4v2,int2,int4 --grid 1x131072,16x32768,128x8192
step sbs_int8 40 ./bitdecode bench attn --device cuda --kernel mma,wgmma --kv int8 --grid 8x32768,16x32768
step minsplit512 40 env BITDECODE_DECODE_MINSPLIT=512 ./bitdecode bench attn --device cuda --kernel mma --kv int4,int2,k4v2 --grid 1x8192,1x32768
tar czf $OUT/results.tgz -C $OUT r
