#!/bin/bash
# build.sh (session 12's final call): the stripped bitdecode and test binaries of the tree, the base
# (session 11's final tree, 5a0fc94) bitdecode as bitdecode-base, gocoder-23m with heldout.txt cut to
# its first 20000 bytes, and dec-7's tune dec settings (T4), into /work/main/.gpu/bundle.tar.xz beside
# final.sh. Usage, from the repo root: bash bench/results/2026-11-26-s12-final/build.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
base=$(mktemp -d); git worktree add -q --detach $base 5a0fc94
(cd $base && go build -ldflags='-s -w' -o $OLDPWD/$G/b/bitdecode-base ./cmd/bitdecode)
git worktree remove --force $base
mkdir -p $G/b/gocoder-23m $G/b/T4
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
cp bench/results/2026-11-26-h100-dec-7/call2/T4/bitdecode.json $G/b/T4/
cp bench/results/2026-11-26-s12-final/final.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
