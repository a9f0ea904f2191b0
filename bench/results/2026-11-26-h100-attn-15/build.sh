#!/bin/bash
# build.sh (session 15, issue #19 item 1): the device call's bundle in /work/main/.gpu-epi:
# bitdecode_main (main's HEAD, from a clean export), bitdecode_new, kernels.test and gpukv.test
# (this worktree's HEAD), gocoder-23m without heldout.txt, as bundle.tar.xz beside run.sh.
# Usage, from the worktree root: bash bench/results/2026-11-26-h100-attn-15/build.sh
set -euo pipefail
W=$(git rev-parse --show-toplevel); cd "$W"
G=/work/main/.gpu-epi; rm -rf $G; mkdir -p $G/b
M=$(git -C /work/main rev-parse HEAD); N=$(git rev-parse HEAD)
E=/tmp/epi-main-src; rm -rf $E; mkdir -p $E
git -C /work/main archive $M | tar -x -C $E
(cd $E && CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/b/bitdecode_main ./cmd/bitdecode)
rm -rf $E
test -z "$(git status --porcelain)" || { echo "worktree not clean"; exit 1; }
CGO_ENABLED=0 go build -ldflags='-s -w' -o $G/b/bitdecode_new ./cmd/bitdecode
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/b/kernels.test ./gpu/kernels
CGO_ENABLED=0 go test -c -ldflags='-s -w' -o $G/b/gpukv.test ./kvcache/gpukv
mkdir -p $G/b/gocoder-23m
for f in /work/shared/models/gocoder-23m/*; do [ "$(basename $f)" = heldout.txt ] || cp $f $G/b/gocoder-23m/; done
echo "main $M new $N" > $G/b/commits.txt
cp bench/results/2026-11-26-h100-attn-15/run.sh $G/
(cd $G/b && tar cf - . | xz -9e -T2 > $G/bundle.tar.xz)
rm -rf $G/b; ls -la $G; cat <<X
main $M new $N
X
