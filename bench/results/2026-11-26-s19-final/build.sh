#!/bin/bash
# build.sh (session 19's lead call): the merged tree's binaries into /work/main/.gpu/a.tar.xz
# (bitdecode, gpukv.test, kernels.test, backend.test), stripped and xz-packed to travel beside the tree.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/a
export CGO_ENABLED=0 GOFLAGS=-p=1
go build -ldflags='-s -w' -o $G/a/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/a/gpukv.test ./kvcache/gpukv
go test -c -ldflags='-s -w' -o $G/a/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/a/backend.test ./backend/gpu
cp bench/results/2026-11-26-s19-final/call.sh $G/
(cd $G/a && tar cf - . | xz -6 -T2 > ../a.tar.xz)
rm -rf $G/a; ls -la $G
