#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine, as root. Idempotent: run it again any time.
#  - Debian packages: what each DB declares (its servers, libfaketime for its clock faults) and
#    the harness's own (iptables, iproute2, procps, openssh-client), derived from the classes
#    by harness/controller/packages.py; venv, chromium, the clients' toolchains
#  - the Python package and its dependencies in ./.venv, and `harness` on PATH
#  - the lock clients in other languages (clients/: Curator, etcd's Go Mutex, npm's redlock and
#    redis-semaphore), built offline from Debian's jars and Go sources and npm, cached
set -euo pipefail
cd "$(dirname "$0")"

say() { printf 'setup: %s\n' "$*"; }
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (it installs Debian packages and uses iptables): sudo bash setup.sh" >&2
  exit 3
fi

packages=(python3 python3-venv python3-pip
          chromium fonts-dejavu-core  # the report tests render report.html headless
          # the external lock clients (docs/clients.md): Curator from Debian's jars with javac,
          # etcd's Go client from Debian's sources with Go 1.19
          openjdk-17-jdk-headless libcurator-recipes-java golang-go golang-etcd-server-dev)
# The servers' and the harness's own: each DB class declares its packages, and this derives the
# list from them with the system Python (the standard library alone: no venv yet).
if ! command -v python3 >/dev/null; then
  say "installing python3 (to read the DBs' packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null
fi
derived=$(python3 -m harness.controller.packages) ||
  { echo "setup: python3 -m harness.controller.packages failed (see above)" >&2; exit 3; }
mapfile -t -O "${#packages[@]}" packages <<<"$derived"
# npm's clients need Node and npm: Debian's, unless a Node is installed already
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
# PostgreSQL: no default cluster at install time (the harness runs initdb per node, per run).
if ! dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q "install ok installed"; then
  mkdir -p /etc/postgresql-common
  [ -e /etc/postgresql-common/createcluster.conf ] ||
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
fi
# Debian starts a system redis on 127.0.0.1:6379; the harness uses its own addresses and ports,
# so that one is left alone.

# The venv's Python: Debian's python3 (built with PGO and LTO; every harness process, client
# and `harness check` starts and runs faster on it than on an unoptimized build such as a pyenv
# or source build that may come first on PATH). PYTHON=/path/to/python3 picks another.
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python >= 3.11 is needed; $("$python" --version 2>&1) found" >&2
  exit 3
fi
base() { "$1" -c 'import os, sys; print(os.path.realpath(sys._base_executable))'; }
if [ -x .venv/bin/python ] && [ "$(base .venv/bin/python)" != "$(base "$python")" ]; then
  say "re-creating .venv on $python (it was made on $(base .venv/bin/python))"
  "$python" -m venv --clear .venv
elif [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$python" -m venv .venv
fi
say "installing the harness and its dependencies into .venv"
# Editable in compat mode: the checkout itself on sys.path (one line in a .pth file), rather
# than setuptools' import finder, which every Python process in the venv would import at start
# (it brings pathlib and re: measured, 7 ms of each `harness check FILE`, 15 ms of `python -c pass`)
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' \
    --config-settings editable_mode=compat >.venv/pip.log 2>&1; then
  tail -n 20 .venv/pip.log >&2
  echo "setup: pip install failed (full log: .venv/pip.log)" >&2
  exit 3
fi
ln -sf "$PWD/.venv/bin/harness" /usr/local/bin/harness

# The lock clients in other languages, each built by its clients/<name>/build.sh into
# /var/cache/lock-harness/clients/<name>-<hash of its sources>/ (nothing is rebuilt when the
# sources did not change). A build that fails fails the set-up, naming it (the tests of that
# client would otherwise be skipped quietly); SETUP_CLIENTS=0 skips them all on purpose.
if [ "${SETUP_CLIENTS:-1}" != "0" ]; then
  failed=()
  for client in $(.venv/bin/python -c \
      'from workloads.external.builds import names; print(*names())'); do
    .venv/bin/python -m workloads.external.builds "$client" || failed+=("$client")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "setup: lock client build failed: ${failed[*]} (see above; retry with .venv/bin/python" \
      "-m workloads.external.builds ${failed[*]}, or SETUP_CLIENTS=0 to go without them)" >&2
    exit 3
  fi
fi

# The docker backend: an engine (Debian's docker.io, dockerd started if none answers) and the
# node image, built offline and cached (docker/README.md). SETUP_DOCKER=0 skips both.
if [ "${SETUP_DOCKER:-1}" != "0" ]; then
  build() {  # build NAME COMMAND...: run it, or fail the set-up in one line naming the build
    local name=$1; shift
    "$@" || { echo "setup: $name failed (exit $?); SETUP_DOCKER=0 goes without it" >&2; exit 3; }
  }
  build "the docker engine (docker/engine.sh)" bash docker/engine.sh
  build "the node image (docker/build_image.py)" .venv/bin/python docker/build_image.py >/dev/null
  # The local backend's clock faults need a Redis that libfaketime can hook (cached).
  build "the libc Redis (docker/build_redis_libc.sh)" bash docker/build_redis_libc.sh >/dev/null
fi
say "ready: $(command -v harness) ($(redis-server --version | cut -d' ' -f1-3))"
