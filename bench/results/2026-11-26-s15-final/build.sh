#!/bin/bash
# build.sh (session 15's final calls): the merged tree's binaries, session 14's final bitdecode
# (31acbd1, built beforehand into /tmp/bund15/bitdecode-base) and, with WITH_MODEL=1, the test
# binaries and gocoder-23m with heldout.txt's first 20000 bytes, into /work/main/.gpu/bundle.tar.xz
# beside the calls' scripts.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
if [ "${WITH_MODEL:-0}" = 1 ]; then
  go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
  go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
  go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
  mkdir -p $G/b/gocoder-23m
  for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
  head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
fi
[ "${WITH_BASE:-1}" = 1 ] && cp /tmp/bund15/bitdecode-base $G/b/bitdecode-base
cp bench/results/2026-11-26-s15-final/*.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
