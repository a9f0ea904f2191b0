#!/usr/bin/env bash
# Round 2 of session 24's arm64 work under qemu-user (no arm64 hardware
# here): linux/arm64 test binaries of attn, backend/cpu and engine, run with
# qemu-aarch64-static (qemu 7.2 reports Advanced SIMD and the dot-product
# extension, so the NEON level runs with and without SDOT's set). Logs go
# to ${OUT:-/tmp/arm64b-24}. Run from the repository root.
set -euo pipefail
out=${OUT:-/tmp/arm64b-24}
mkdir -p "$out"
export CGO_ENABLED=0 GOARCH=arm64 GOFLAGS=-p=1
for p in backend/cpu attn; do
  b="$out/$(basename $p).test"
  go test -c -o "$b" ./$p
  (cd $p && { time qemu-aarch64-static "$b" -test.short -test.timeout 25m ; } > "$out/$(basename $p).log" 2>&1) || echo "FAIL $p"
  tail -4 "$out/$(basename $p).log"
done
# The kernel tests named by this round, verbose (which sets ran).
(cd attn && qemu-aarch64-static "$out/attn.test" -test.short -test.v \
  -test.run 'TestScoreKernels|TestForceSelectsKernels' > "$out/attn-kernels.log" 2>&1) || echo "FAIL attn kernels"
(cd backend/cpu && qemu-aarch64-static "$out/cpu.test" -test.short -test.v \
  -test.run 'TestElementwiseLevels|TestSiLU' > "$out/cpu-elementwise.log" 2>&1) || echo "FAIL cpu elementwise"
# The embedded model's golden greedy tokens at NEON (now with SDOT's integer
# keys for the int8/int4/int2 KV formats).
go test -c -o "$out/engine.test" ./engine
(cd engine && { time qemu-aarch64-static "$out/engine.test" -test.run 'TestEmbeddedGolden$' -test.v ; } > "$out/golden.log" 2>&1) || echo "FAIL golden"
grep -E 'greedy tokens agreeing|^(PASS|FAIL)' "$out/golden.log"
# attn with -tags purego (the Generic level only).
go test -c -tags purego -o "$out/attn-purego.test" ./attn
(cd attn && { time qemu-aarch64-static "$out/attn-purego.test" -test.short -test.timeout 25m ; } > "$out/attn-purego.log" 2>&1) || echo "FAIL attn purego"
