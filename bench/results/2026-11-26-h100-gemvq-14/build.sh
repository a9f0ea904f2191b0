#!/bin/bash
# build.sh (s13-gemvq2): the stripped bitdecode and kernels.test (gpu/kernels) of this branch, and
# for run2.sh also backend.test (backend/gpu), main's bitdecode (/work/main's HEAD) as
# bitdecode-main and gocoder-23m (heldout.txt cut to its first 20000 bytes), into /work/main/.gpu-gemvq2/bundle.tar.xz beside the script.
# Usage, from the repo root: bash bench/results/2026-11-26-h100-gemvq-14/build.sh run1.sh|run2.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-gemvq2; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
if [ "$1" = run2.sh ]; then
  go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
  (cd /work/main && git rev-parse HEAD > $G/b/main.commit && go build -ldflags='-s -w' -o $G/b/bitdecode-main ./cmd/bitdecode)
  mkdir -p $G/b/gocoder-23m
  for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
  head -c 20000 /work/shared/models/gocoder-23m/heldout.txt > $G/b/gocoder-23m/heldout.txt
fi
cp bench/results/2026-11-26-h100-gemvq-14/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
