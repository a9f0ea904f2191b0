#!/bin/bash
# build.sh (session 16's lead calls): the merged tree's bitdecode and test binaries (kernels,
# backend/gpu; gpukv and gocoder-23m with WITH_MODEL=1) into /work/main/.gpu/bundle.tar.xz beside
# the calls' scripts; bitdecode-base is f37916d (session 16's start) when /tmp/bitdecode-base16 exists.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
# session 16's starting point (f37916d), built beforehand into /tmp/bitdecode-base16
[ -f /tmp/bitdecode-base16 ] && cp /tmp/bitdecode-base16 $G/b/bitdecode-base
if [ "${WITH_MODEL:-0}" = 1 ]; then
  mkdir -p $G/b/gocoder-23m
  for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
  head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
fi
cp bench/results/2026-11-26-s16-final/*.sh $G/
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
