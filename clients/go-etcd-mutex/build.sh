#!/usr/bin/env bash
# Build the Go client into $1 with Debian's Go and etcd 3.4 sources (golang-go,
# golang-etcd-server-dev: /usr/share/gocode), in GOPATH mode: no module is downloaded.
# Called by `python -m workloads.external.builds`.
set -euo pipefail
out=${1:?usage: build.sh OUT}
command -v go >/dev/null || { echo "go-etcd-mutex: go is missing (apt-get install golang-go)"; exit 1; }
[ -d /usr/share/gocode/src/go.etcd.io/etcd/clientv3/concurrency ] || {
  echo "go-etcd-mutex: etcd's Go sources are missing (apt-get install golang-etcd-server-dev)"; exit 1; }
src="$out/gopath/src/lockharness/goetcdmutex"
mkdir -p "$src"
cp ./*.go "$src/"
cache=${LOCK_HARNESS_CACHE:-/var/cache/lock-harness/clients}/.go-build
(cd "$src" && GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH="$out/gopath:/usr/share/gocode" \
  GOCACHE="$cache" go build -o "$out/client" .)
rm -rf "$out/gopath"
go version
