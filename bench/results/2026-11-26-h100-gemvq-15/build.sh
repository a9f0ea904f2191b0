#!/bin/bash
# build.sh (s13-gemvq3): the stripped bitdecode, kernels.test (gpu/kernels) and backend.test
# (backend/gpu) of this branch and gocoder-23m (heldout.txt cut to its first 20000 bytes), into
# /work/main/.gpu-gemvq3/bundle.tar.xz beside the run script.
# Usage, from the repo root: bash bench/results/2026-11-26-h100-gemvq-15/build.sh run1.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-gemvq3; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
git rev-parse HEAD > $G/b/commit
mkdir -p $G/b/gocoder-23m
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
cp bench/results/2026-11-26-h100-gemvq-15/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
