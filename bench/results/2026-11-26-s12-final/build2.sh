#!/bin/bash
# build2.sh (session 12's fourth call): the tree's binaries, call 3's bitdecode as bitdecode-prev2
# (from /tmp/bund, built by the third call's step), gocoder-23m with heldout.txt's first 20000
# bytes, into /work/main/.gpu/bundle.tar.xz beside final2.sh.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
cp /tmp/bund/bitdecode $G/b/bitdecode-prev2
mkdir -p $G/b/gocoder-23m
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
cp bench/results/2026-11-26-s12-final/final2.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
