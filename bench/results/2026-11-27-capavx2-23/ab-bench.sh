#!/bin/bash
# ab-bench.sh OUTDIR PAIRS BIN.test... : BenchmarkDecodeSoftcap (Gemma-2-9B's shape, L 8192,
# cap 0 and 50 back to back per format) at the avx2 and avx512 levels, one and two threads,
# each test binary in turn within a pair; one log per binary and pair in OUTDIR.
set -u
out=$1; pairs=$2; shift 2
mkdir -p "$out"
for p in $(seq 1 "$pairs"); do
  for bin in "$@"; do
    { uptime; "$bin" -test.run '^$' -test.bench 'DecodeSoftcap/(avx2|avx512)/' -test.benchtime 0.5s \
        -test.cpu 1,2 -test.count 1; } >"$out/$(basename "$bin" .test)-$p.log" 2>&1
  done
done
