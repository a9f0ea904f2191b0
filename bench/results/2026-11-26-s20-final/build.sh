#!/bin/bash
# build.sh (session 20's lead call): the merged tree's binaries into /work/main/.gpu/a.tar.xz
# (bitdecode, gpukv.test, kernels.test, backend.test) and session 20's int4 DEC tuning
# (bench/results/2026-11-26-decsel-20's call1/tune4/bitdecode.json) beside them.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/a
export CGO_ENABLED=0 GOFLAGS=-p=1
go build -ldflags='-s -w' -o $G/a/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/a/gpukv.test ./kvcache/gpukv
go test -c -ldflags='-s -w' -o $G/a/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/a/backend.test ./backend/gpu
mkdir -p $G/a/tune4 /tmp/tune-x
tar xJf bench/results/2026-11-26-decsel-20/logs.tar.xz -C /tmp/tune-x call1/tune4/bitdecode.json
cp /tmp/tune-x/call1/tune4/bitdecode.json $G/a/tune4/
cp bench/results/2026-11-26-s20-final/call.sh $G/
(cd $G/a && tar cf - . | xz -6 -T2 > ../a.tar.xz)
rm -rf $G/a; ls -la $G
