#!/bin/bash
# bitdecode run --device cpu --weights int4: base (float int4 by default; int8dot = v2.9) and new
# (integer by default; float), alternated, 4 rounds; decode 256 tokens and a 1,393-token prompt.
M=/work/shared/models/gocoder-23m
for r in 1 2 3 4; do
  for c in "base float" "base int8dot" "new int8dot" "new float"; do
    set -- $c
    a=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights int4 --compare-fp16=false --max-tokens 256 'func main() {' 2>&1 >/dev/null | grep "new tokens")
    b=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights int4 --compare-fp16=false --max-tokens 1 --prompt-file /tmp/q4/prompt1k.txt 2>&1 >/dev/null | grep "prompt tokens")
    echo "round $r | $1 $2 | load $(cut -d' ' -f1 /proc/loadavg) | ${a%%;*} | ${b%%;*}"
  done
done
