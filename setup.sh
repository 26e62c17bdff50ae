#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine, as root. Idempotent: run it again any time.
#  - Python, its venv, chromium (the report tests render report.html headless)
#  - the Python package and its dependencies in ./.venv, and `harness` on PATH
#  - then `harness setup` of everything: the Debian packages each role declares (the DBs'
#    servers, iptables for partitions, libfaketime for clocks, the clients' toolchains), the
#    lock clients in other languages (clients/: Curator, etcd's Go Mutex, npm's redlock and
#    redis-semaphore, built offline and cached), the docker engine, the node image and the
#    libc Redis. `harness doctor` says what is there; `harness setup --help` the parts.
set -euo pipefail
cd "$(dirname "$0")"

say() { printf 'setup: %s\n' "$*"; }
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (it installs Debian packages and uses iptables): sudo bash setup.sh" >&2
  exit 3
fi

packages=(python3 python3-venv python3-pip
          chromium fonts-dejavu-core)  # the report tests render report.html headless
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
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,zoo]' \
    --config-settings editable_mode=compat >.venv/pip.log 2>&1; then
  tail -n 20 .venv/pip.log >&2
  echo "setup: pip install failed (full log: .venv/pip.log)" >&2
  exit 3
fi
ln -sf "$PWD/.venv/bin/harness" /usr/local/bin/harness

# What each role needs (harness/controller/setup_cmd.py): its Debian packages, then the lock
# clients, each built by its clients/<name>/build.sh into
# /var/cache/lock-harness/clients/<name>-<hash of its sources>/ (nothing is rebuilt when the
# sources did not change; a build that fails fails the set-up, naming it: SETUP_CLIENTS=0 skips
# them all on purpose), then the docker backend's engine (Debian's docker.io, dockerd started if
# none answers), its node image and the local backend's libc Redis for clock faults, built
# offline and cached (docker/README.md): SETUP_DOCKER=0 skips them.
parts=(--db all --nemesis all --backend local,ssh)
[ "${SETUP_CLIENTS:-1}" = "0" ] || parts+=(--clients all)
[ "${SETUP_DOCKER:-1}" = "0" ] || parts+=(--backend docker)
if ! .venv/bin/harness setup "${parts[@]}"; then
  echo "setup: harness setup ${parts[*]} failed (see above); SETUP_CLIENTS=0 goes without the" \
    "lock clients, SETUP_DOCKER=0 without the docker engine and image" >&2
  exit 3
fi
say "ready: $(command -v harness) ($(redis-server --version | cut -d' ' -f1-3))"
