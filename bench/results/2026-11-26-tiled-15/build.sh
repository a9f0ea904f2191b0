#!/bin/bash
# build.sh (s15-tiled): stripped bitdecode, kernels.test (gpu/kernels), backend.test (backend/gpu)
# of this branch, main's bitdecode (5356d4c, built in a detached worktree /tmp/base-tiled as
# /tmp/tiled-bitdecode-main) and gocoder-23m (heldout.txt cut to 20000 bytes) into
# /work/main/.gpu-tiled/bundle.tar.xz beside the call's script.
# Usage, from the repo root: bash bench/results/2026-11-26-tiled-15/build.sh call1.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-tiled; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0 GOFLAGS=-p=1
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
cp /tmp/tiled-bitdecode-main $G/b/bitdecode-main
mkdir -p $G/b/gocoder-23m
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
git rev-parse HEAD > $G/b/commit
cp bench/results/2026-11-26-tiled-15/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -9e -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
