#!/bin/bash
# build.sh (session 18's lead calls): the merged tree's binaries into /work/main/.gpu/.
#   call A (.gpu/a.tar.xz): bitdecode, gpukv.test, kernels.test and the official OpenAI Python client's
#     source (openai 2.54.0 from its v2.54.0 tag, unpacked at /tmp/oai; jiter stubbed)
#   call B (.gpu-b/b.tar.xz): backend.test and the reference checkpoint gocoder-23m (xz), which does not fit
#     beside call A's binaries under the 64 MiB that travel with the tree.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
G=.gpu; rm -rf $G; mkdir -p $G/a $G/b/shared/models
export CGO_ENABLED=0 GOFLAGS=-p=1
go build -ldflags='-s -w' -o $G/a/bitdecode ./cmd/bitdecode
go test -c -ldflags='-s -w' -o $G/a/gpukv.test ./kvcache/gpukv
go test -c -ldflags='-s -w' -o $G/a/kernels.test ./gpu/kernels
cp tools/openai-client/check.py $G/a/
(cd /tmp/oai && tar chf - src stub deps) > $G/a/oai.tar   # deps: Debian 12's httpx 0.23, anyio, distro, used only if the device lacks them
go test -c -ldflags='-s -w' -o $G/b/backend.test ./backend/gpu
cp -r ../shared/models/gocoder-23m $G/b/shared/models/
rm -f $G/b/shared/models/gocoder-23m/heldout.txt
cp bench/results/2026-11-26-s18-final/*.sh $G/
(cd $G/a && tar cf - . | xz -6 -T2 > ../a.tar.xz)
mkdir -p .gpu-b; (cd $G/b && tar cf - . | xz -6 -T2 > ../../.gpu-b/b.tar.xz); cp bench/results/2026-11-26-s18-final/callB.sh .gpu-b/
rm -rf $G/a $G/b; ls -la $G .gpu-b
