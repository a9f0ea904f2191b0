#!/bin/bash
# bitdecode run --device cpu --kv int4 with --weights int3 and int4: base (main fd512dc) against new4 (this branch, final) default and float; alternated, 4 rounds.
M=/work/shared/models/gocoder-23m
for r in 1 2 3 4; do
  for wt in int3 int4; do
    for c in "base float" "new4 int8dot" "new4 float"; do
      set -- $c
      a=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights $wt --compare-fp16=false --max-tokens 256 'func main() {' 2>&1 >/dev/null | grep "new tokens")
      b=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights $wt --compare-fp16=false --max-tokens 1 --prompt-file /tmp/q4/prompt1k.txt 2>&1 >/dev/null | grep "prompt tokens")
      echo "round $r | $wt | $1 $2 | load $(cut -d' ' -f1 /proc/loadavg) | ${a%%;*} | ${b%%;*}"
    done
  done
done
