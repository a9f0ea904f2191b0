#!/bin/bash
# generic.sh OUTDIR RUNS BIN.test : BenchmarkDecodeSoftcap at the generic level (pure Go: what
# -tags purego and arm64 run), one and two threads; one log per run in OUTDIR.
set -u
out=$1; runs=$2; bin=$3
mkdir -p "$out"
for p in $(seq 1 "$runs"); do
  { uptime; "$bin" -test.run '^$' -test.bench 'DecodeSoftcap/generic/' -test.benchtime 0.5s \
      -test.cpu 1,2 -test.count 1; } >"$out/$(basename "$bin" .test)-generic-$p.log" 2>&1
done
