#!/bin/bash
# build.sh (s14-gemvq): the stripped bitdecode, kernels.test (gpu/kernels) and backend.test
# (backend/gpu) of this branch, main's bitdecode (the branch's base, 9d3f0e4: the same code as
# main's baf9455) as bitdecode-main, into /work/main/.gpu-gemvq/bundle.tar.xz beside the run script.
# Usage, from the repo root: bash bench/results/2026-11-26-h100-gemvq-16/build.sh run1.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=/work/main/.gpu-gemvq; rm -rf $G; mkdir -p $G/b
export CGO_ENABLED=0
go build -ldflags='-s -w' -o $G/b/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
if [ ! -x /tmp/gemvq-base/bitdecode-main ]; then
  rm -rf /tmp/gemvq-base; mkdir -p /tmp/gemvq-base/src
  git archive 9d3f0e4 | tar -x -C /tmp/gemvq-base/src
  (cd /tmp/gemvq-base/src && go build -ldflags='-s -w' -o ../bitdecode-main ./cmd/bitdecode)
fi
cp /tmp/gemvq-base/bitdecode-main $G/b/
git rev-parse HEAD > $G/b/commit
cp bench/results/2026-11-26-h100-gemvq-16/$1 $G/run.sh
(cd $G/b && tar cf - . | xz -6 -T2 > ../bundle.tar.xz)
rm -rf $G/b; ls -la $G
