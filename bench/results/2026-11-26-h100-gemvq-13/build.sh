#!/bin/bash
# build.sh (s13-gemvq): the stripped bitdecode and test binaries of this branch, and gocoder-23m
# with heldout.txt cut to its first 20000 bytes (call 1: run.sh) or
# main's (97c35bf, this branch's base and /work/main's HEAD) as bitdecode-main (call 2: run2.sh;
# the carry is at most 64 MiB with the tree, so not both), into /work/main/.gpu-gemvq/
# bundle.tar.xz beside the script.
# Usage, from the repo root: bash bench/results/2026-11-26-h100-gemvq-13/build.sh run.sh|run2.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-gemvq; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
if [ "$1" = run.sh ]; then
  mkdir -p $G/b/gocoder-23m
  for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
  head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
else
  base=$(mktemp -d); git worktree add -q --detach $base 97c35bf
  (cd $base && go build -ldflags='-s -w' -o $G/b/bitdecode-main ./cmd/bitdecode)
  git worktree remove --force $base
fi
cp bench/results/2026-11-26-h100-gemvq-13/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
