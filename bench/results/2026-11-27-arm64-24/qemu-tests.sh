#!/usr/bin/env bash
# The arm64 tests of session 24 under qemu-user (no arm64 hardware here):
# build linux/arm64 test binaries of the CPU packages, at the NEON level and
# with -tags purego, and run them with qemu-aarch64-static. Logs go to
# ${OUT:-/tmp/arm64-24}. Run from the repository root.
set -euo pipefail
out=${OUT:-/tmp/arm64-24}
mkdir -p "$out"
export CGO_ENABLED=0 GOARCH=arm64 GOFLAGS=-p=1
for tags in "" purego; do
  sfx=${tags:+-$tags}
  for p in internal/cpufeat backend/cpu attn; do
    b="$out/$(basename $p)$sfx.test"
    go test -c ${tags:+-tags $tags} -o "$b" ./$p
    { time qemu-aarch64-static "$b" -test.short -test.v ; } > "$out/$(basename $p)$sfx.log" 2>&1 || echo "FAIL $p $tags"
    grep -E '^(PASS|FAIL|ok)|^--- FAIL|real' "$out/$(basename $p)$sfx.log" | tail -3
  done
done
# The embedded model's golden greedy tokens (engine.TestEmbeddedGolden, CPU)
# and the README's first command, NEON and pure Go (run has no --simd flag:
# the purego build is the Generic level). The CLI links purego, which makes
# it a dynamically linked binary: qemu needs an arm64 loader and libc
# (apt-get install libc6-arm64-cross; -L names its root).
for tags in "" purego; do
  sfx=${tags:+-$tags}
  go test -c ${tags:+-tags $tags} -o "$out/engine$sfx.test" ./engine
  { time qemu-aarch64-static "$out/engine$sfx.test" -test.run 'TestEmbeddedGolden$' -test.v ; } > "$out/golden$sfx.log" 2>&1 || echo "FAIL golden $tags"
  go build ${tags:+-tags $tags} -o "$out/bitdecode$sfx" ./cmd/bitdecode
  { time qemu-aarch64-static -L /usr/aarch64-linux-gnu "$out/bitdecode$sfx" run --device cpu --kv int4 "func main() {" ; } > "$out/run$sfx.log" 2>&1 || echo "FAIL run $tags"
done
