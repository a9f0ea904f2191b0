#!/bin/bash
# int3 after int3QuantXVBMI: base (main fd512dc, float), new3 (Go quantization), new4 (AVX-512 quantization);
# bench linear wq-int3 T = 1, 512 and run --weights int3, alternated, 3 rounds.
M=/work/shared/models/gocoder-23m
for r in 1 2 3; do
  for c in "base float" "new3 int8dot" "new4 int8dot"; do
    set -- $c
    echo "== round $r: $1 BITDECODE_CPU_INT4=$2 ($(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))"
    BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 bench linear --model $M --formats wq-int3 --rows 1,512 --kv "" 2>&1 | grep -v "^load"
    a=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights int3 --compare-fp16=false --max-tokens 256 'func main() {' 2>&1 >/dev/null | grep "new tokens")
    b=$(BITDECODE_CPU_INT4=$2 /tmp/q4/bd-$1 run --model $M --device cpu --kv int4 --weights int3 --compare-fp16=false --max-tokens 1 --prompt-file /tmp/q4/prompt1k.txt 2>&1 >/dev/null | grep "prompt tokens")
    echo "run | $1 $2 | ${a%%;*} | ${b%%;*}"
  done
done
