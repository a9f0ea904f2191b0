#!/bin/bash
# bench linear, wq-int4 at T = 1 and 512: base (main fd512dc) float and int8dot (v2.9),
# new (s22-q4dot) default (integer, 16-bit x codes) and float; alternated, 3 rounds.
M=/work/shared/models/gocoder-23m
cd /tmp/q4/lin
for r in 1 2 3; do
  for c in "base float" "base int8dot" "new int8dot" "new float"; do
    set -- $c
    echo "== round $r: $1 BITDECODE_CPU_INT4=$2 ($(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 bench linear --model $M --formats wq-int4 --rows 1,512 --kv "" 2>&1 | grep -v "^load"
  done
done
