#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine, as root. Idempotent: run it again any time.
# First what README's main job (`harness run`: redis-setnx under pauses, local backend) needs,
# so that it is ready in a line that says so:
#  - Python and its venv; the Python package and its dependencies in ./.venv, `harness` on PATH
#  - `harness setup --db redis --nemesis pause --backend local`: redis-server and the harness's
#    own packages (iptables, procps, iproute2)
# then the rest (SETUP_EXTRAS=0 stops before it; CI needs it all):
#  - chromium (the report tests render report.html headless)
#  - `harness setup` of everything: the Debian packages each role declares (the DBs' servers,
#    libfaketime for clocks, the clients' toolchains), then at once, each with its own log and
#    a line as it ends: the docker engine, the node image and the libc Redis; each lock client
#    in another language (clients/: Curator, etcd's Go Mutex, npm's redlock and
#    redis-semaphore, built offline and cached). `harness doctor` says what is there;
#    `harness setup --help` the parts. `bash setup.sh --dry-run` prints the commands only.
set -euo pipefail
cd "$(dirname "$0")"

say() { printf 'setup: %s\n' "$*"; }
dry=0
case "${1:-}" in
  "") ;;
  --dry-run) dry=1 ;;
  *) echo "setup: usage: bash setup.sh [--dry-run]" >&2; exit 64 ;;
esac
if [ "$dry" = 0 ] && [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (it installs Debian packages and uses iptables): sudo bash setup.sh" >&2
  exit 3
fi

packages=(python3 python3-venv python3-pip)
report_packages=(chromium fonts-dejavu-core)  # the report tests render report.html headless
# PostgreSQL: no default cluster at install time (the harness runs initdb per node, per run).
if [ "$dry" = 0 ] && ! dpkg-query -W -f='${Status}' postgresql 2>/dev/null |
    grep -q "install ok installed"; then
  mkdir -p /etc/postgresql-common
  [ -e /etc/postgresql-common/createcluster.conf ] ||
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
fi
apt_install() {  # the packages named that are not installed yet
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  say "installing Debian packages: ${missing[*]}"
  [ "$dry" = 0 ] || { echo "apt-get install --no-install-recommends ${missing[*]}"; return 0; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
}
apt_install "${packages[@]}"
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
if [ "$dry" = 1 ]; then
  echo "$python -m venv .venv  # unless .venv is there, on $python"
  echo ".venv/bin/python -m pip install -e '.[test,zoo]' --config-settings editable_mode=compat"
  echo "ln -sf $PWD/.venv/bin/harness /usr/local/bin/harness"
elif [ -x .venv/bin/python ] && [ "$(base .venv/bin/python)" != "$(base "$python")" ]; then
  say "re-creating .venv on $python (it was made on $(base .venv/bin/python))"
  "$python" -m venv --clear .venv
elif [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$python" -m venv .venv
fi
if [ "$dry" = 0 ]; then
  say "installing the harness and its dependencies into .venv"
  # Editable in compat mode: the checkout itself on sys.path (one line in a .pth file), rather
  # than setuptools' import finder, which every Python process in the venv would import at
  # start (it brings pathlib and re: measured, 7 ms of each `harness check FILE`, 15 ms of
  # `python -c pass`)
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,zoo]' \
      --config-settings editable_mode=compat >.venv/pip.log 2>&1; then
    tail -n 20 .venv/pip.log >&2
    echo "setup: pip install failed (full log: .venv/pip.log)" >&2
    exit 3
  fi
  ln -sf "$PWD/.venv/bin/harness" /usr/local/bin/harness
fi
harness_setup() {  # harness setup PARTS..., or its commands only (--dry-run)
  if [ "$dry" = 1 ] && [ ! -x .venv/bin/harness ]; then
    echo ".venv/bin/harness setup $*"
  elif ! .venv/bin/harness setup "$@" $([ "$dry" = 0 ] || echo --dry-run); then
    echo "setup: harness setup $* failed (see above); SETUP_CLIENTS=0 goes without the" \
      "lock clients, SETUP_DOCKER=0 without the docker engine and image, SETUP_EXTRAS=0" \
      "without all but the main job's needs" >&2
    exit 3
  fi
}
harness_setup --db redis --nemesis pause --backend local
[ "$dry" = 1 ] || say "ready for the main job, \`harness run\`, after ${SECONDS} s"
[ "${SETUP_EXTRAS:-1}" != "0" ] || exit 0

# The rest. What each role needs (harness/controller/setup_cmd.py): its Debian packages, then,
# at once, the lock clients, each built by its clients/<name>/build.sh into
# /var/cache/lock-harness/clients/<name>-<hash of its sources>/ (nothing is rebuilt when the
# sources did not change; a build that fails fails the set-up, naming it: SETUP_CLIENTS=0 skips
# them all on purpose), and the docker backend's engine (Debian's docker.io, dockerd started if
# none answers), its node image and the local backend's libc Redis for clock faults, built
# offline and cached (docker/README.md): SETUP_DOCKER=0 skips the engine and the image (the
# libc Redis is then a job of its own: the clock faults ask for it).
apt_install "${report_packages[@]}"
parts=(--db all --nemesis all --backend local,ssh)
[ "${SETUP_CLIENTS:-1}" = "0" ] || parts+=(--clients all)
[ "${SETUP_DOCKER:-1}" = "0" ] || parts+=(--backend docker)
harness_setup "${parts[@]}"
[ "$dry" = 1 ] || say "ready after ${SECONDS} s: $(command -v harness) ($(redis-server --version | cut -d' ' -f1-3))"
