#!/bin/bash
# build.sh (session 14, issue #19 item 1): one stripped bitdecode per candidate of the int2 tile
# loop (decode_mma.cu with variants.patch applied: the S14 switch, BD_S14 = 1..8), into
# /work/main/.gpu-spill/bundle.tar.xz with the test binaries (built with BD_S14=$LAND) and
# gocoder-23m without heldout.txt. main's binary is HEAD's decode_mma.cu (no switch); the
# worktree's file is HEAD's again at the end.
# Usage, from the worktree root: bash bench/results/2026-11-25-h100-attn-14/build.sh [LAND=2]
set -euo pipefail
LAND=${1:-2}
W=$(git rev-parse --show-toplevel); cd "$W"
G=/work/main/.gpu-spill; rm -rf $G; mkdir -p $G/b
K=gpu/kernels/decode_mma.cu
P=bench/results/2026-11-25-h100-attn-14/variants.patch
# The switch source: HEAD's decode_mma.cu with variants.patch (made against 6c7bf50's).
git show HEAD:$K > /tmp/s14_main.cu
cp /tmp/s14_main.cu $K
git apply $P
cp $K /tmp/s14_switch.cu
restore() { cp /tmp/s14_main.cu $W/$K; }
trap restore EXIT
cp /tmp/s14_main.cu $K
CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/b/bitdecode_main ./cmd/bitdecode
for v in 1 2 3 4 5 6 7 8; do
  sed "s/^#define BD_S14 0$/#define BD_S14 $v/" /tmp/s14_switch.cu > $K
  grep -q "^#define BD_S14 $v$" $K
  CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/b/bitdecode_v$v ./cmd/bitdecode
done
sed "s/^#define BD_S14 0$/#define BD_S14 $LAND/" /tmp/s14_switch.cu > $K
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
restore
mkdir -p $G/b/gocoder-23m
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
cp bench/results/2026-11-25-h100-attn-14/run.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > $G/bundle.tar.xz)
rm -rf $G/b; ls -la $G
