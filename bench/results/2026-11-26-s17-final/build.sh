#!/bin/bash
# build.sh (session 17's lead call): the merged tree's bitdecode and test binaries (backend/gpu,
# kvcache/gpukv) into /work/main/.gpu/bundle.tar.xz beside the call's script.
# The transformers fixtures travel with the tree (internal/hfcheck/testdata): gpukv.test finds them
# from its working directory (.gpu/kvcache/gpukv) upward.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
# (engine.test, the sampler bench, stays home: the tree is 53.7 MB of the 64 MiB that travel)
cp bench/results/2026-11-26-s17-final/*.sh $G/
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
