#!/bin/bash
# bench linear, wq-int3 and wq-int4 at T = 1 and 512: base (main fd512dc, float paths) against
# new3 (s22-q4dot with the int3 integer path) default and float; alternated, 3 rounds.
M=/work/shared/models/gocoder-23m
for r in 1 2 3; do
  for c in "base float" "new3 int8dot" "new3 float"; do
    set -- $c
    echo "== round $r: $1 BITDECODE_CPU_INT4=$2 ($(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 bench linear --model $M --formats wq-int3,wq-int4 --rows 1,512 --kv "" 2>&1 | grep -v "^load"
  done
done
