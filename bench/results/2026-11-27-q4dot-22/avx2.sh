#!/bin/bash
# The int4 paths at the AVX2 level forced on the Zen 4 (bench linear --simd avx2): the integer
# path's VPMADDUBSW + VPMADDWD tile against the float packed order's AVX2 tiles; 2 rounds.
M=/work/shared/models/gocoder-23m
for r in 1 2; do for mode in float int8dot; do
  echo "== round $r: new4 BITDECODE_CPU_INT4=$mode (avx2, load $(cut -d' ' -f1 /proc/loadavg))"
  BITDECODE_CPU_INT4=$mode /tmp/q4/bd-new4 bench linear --simd avx2 --model $M --formats wq-int4 --rows 1,512 --kv "" 2>&1 | grep -v "^load"
done; done
