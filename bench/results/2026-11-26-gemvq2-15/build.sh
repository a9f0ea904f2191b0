#!/bin/bash
# build.sh (s15-gemvq2): stripped bitdecode, kernels.test (gpu/kernels), backend.test (backend/gpu)
# of this branch and main's bitdecode (the branch's base c587989, built in a detached worktree at
# /tmp/base-gemvq2 as /tmp/g2/bins/bitdecode-base) into /work/main/.gpu-gemvq2/bundle.tar.xz beside
# the run script. Usage, from the repo root: bash bench/results/2026-11-26-gemvq2-15/build.sh call1.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-gemvq2; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0 GOFLAGS=-p=1
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
cp /tmp/g2/bins/bitdecode-base $G/b/bitdecode-main
git rev-parse HEAD > $G/b/commit
cp bench/results/2026-11-26-gemvq2-15/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
