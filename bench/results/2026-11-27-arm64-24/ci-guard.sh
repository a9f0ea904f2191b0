#!/usr/bin/env bash
# Cold-cache cost of each cross-platform vet considered for .ci/run
# (session 24). Run from the repository root.
set -uo pipefail
export CGO_ENABLED=0
run() { # GOOS GOARCH PACKAGES...
  local os=$1 arch=$2; shift 2
  local c; c=$(mktemp -d)
  local s=$SECONDS
  GOCACHE=$c GOOS=$os GOARCH=$arch go vet "$@" > /dev/null 2>&1
  echo "$os/$arch go vet $*: rc $?, $((SECONDS - s)) s"
  rm -rf "$c"
}
uptime
run windows amd64 ./...
run linux arm64 ./...
run windows amd64 ./gpu/cuda/...
run linux arm64 ./internal/cpufeat/... ./backend/cpu/... ./attn/...
run windows arm64 ./gpu/cuda/... ./internal/cpufeat/... ./backend/cpu/... ./attn/...
uptime
