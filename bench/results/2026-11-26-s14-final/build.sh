#!/bin/bash
# build.sh (session 14's final call): the merged tree's binaries, session 13's final bitdecode
# (9d3f0e4, built beforehand into /tmp/bund14/bitdecode-base) and, with WITH_MODEL=1, gocoder-23m
# with heldout.txt's first 20000 bytes, into /work/main/.gpu/bundle.tar.xz beside the call's script.
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
cp /tmp/bund14/bitdecode-base $G/b/bitdecode-base
cp bench/results/2026-11-26-s14-final/*.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
