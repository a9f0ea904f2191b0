#!/bin/bash
# measure.sh OUTDIR PAIRS LEVELS BIN... : bench attn at Gemma-2-9B's shape (16/8 heads, D 256),
# (1, 8192), fp16/int8/int4/int2, --softcap 0 and 50 alternated, each binary in turn within a
# pair, at each level of LEVELS (e.g. "avx512 avx2 generic"); one log per run in OUTDIR.
set -u
out=$1; pairs=$2; levels=$3; shift 3
mkdir -p "$out"
for p in $(seq 1 "$pairs"); do
  for lvl in $levels; do
    for bin in "$@"; do
      for cap in 0 50; do
        log="$out/$(basename "$bin")-$lvl-cap$cap-$p.log"
        { uptime; "$bin" bench attn --device cpu --kv fp16,int8,int4,int2 --heads 16 --kv-heads 8 \
            --head-dim 256 --grid 1x8192 --softcap $cap --simd $lvl; } >"$log" 2>&1
      done
    done
  done
done
