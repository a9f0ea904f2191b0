#!/bin/bash
# build2.sh (session 14's final call 2): bitdecode from the merged tree, session 13's final binary
# (/tmp/bund14/bitdecode-base, 9d3f0e4), s14-b8k's bitdecode and test binary (its worktree,
# /work/wt-b8k), the merged tree's kernels test binary; into /work/main/.gpu/bundle.tar.xz.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=$PWD/.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
(cd /work/wt-b8k && go build -ldflags='-s -w' -o $G/b/bitdecode-b8k ./cmd/bitdecode && go test -c -ldflags='-s -w' -o $G/b/kernels-b8k.test ./gpu/kernels)
cp /tmp/bund14/bitdecode-base $G/b/bitdecode-base
cp bench/results/2026-11-26-s14-final/*.sh $G/
(cd $G/b && tar cf - . | xz -9 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
