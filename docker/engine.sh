#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine.
#
#   bash docker/engine.sh
#
# - If `docker info` already answers: says so, changes nothing.
# - Otherwise (root only): installs Debian's docker.io if dockerd is missing, starts dockerd in
#   the background (log: /var/log/lock-harness-dockerd.log), waits until it answers (bounded)
#   with the docker client on PATH *and* with the Python SDK when one is importable.
# Prints one line on success; one clear line on stderr and a non-zero exit on failure.
# Idempotent: safe to run any number of times.
set -uo pipefail

LOG=/var/log/lock-harness-dockerd.log
WAIT_S=${LOCK_HARNESS_DOCKERD_WAIT:-60}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${LOCK_HARNESS_PYTHON:-$HERE/../.venv/bin/python}

die() { echo "engine.sh: $*" >&2; exit 1; }

engine_answers() {
    # The CLI on PATH (it may be a newer client than Debian's dockerd: it negotiates the API).
    timeout 10 docker info >/dev/null 2>&1
}

sdk_answers() {
    # The Python SDK (docker>=7 negotiates the API version: version="auto").
    [ -x "$PY" ] || return 0
    "$PY" -c 'import docker' >/dev/null 2>&1 || return 0
    timeout 10 "$PY" -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1
}

server_version() {
    timeout 10 docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' \
        2>/dev/null || echo "?"
}

if ! command -v docker >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
    PATH=/usr/bin:$PATH
fi

if command -v docker >/dev/null 2>&1 && engine_answers; then
    if ! sdk_answers; then
        die "docker CLI answers but the Python SDK ($PY) cannot reach the engine (DOCKER_HOST=${DOCKER_HOST:-unset})"
    fi
    echo "docker engine already running: $(server_version), client $(command -v docker)"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "no docker engine answers and we are not root: start dockerd (or run this as root)"

if ! command -v dockerd >/dev/null 2>&1; then
    echo "engine.sh: installing Debian's docker.io (apt-get) ..." >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends docker.io >/tmp/lock-harness-apt.log 2>&1; then
        apt-get update -q >>/tmp/lock-harness-apt.log 2>&1 || true
        apt-get install -y -q --no-install-recommends docker.io >>/tmp/lock-harness-apt.log 2>&1 ||
            die "apt-get install docker.io failed (see /tmp/lock-harness-apt.log)"
    fi
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd is not on PATH"
fi
command -v docker >/dev/null 2>&1 || PATH=/usr/bin:$PATH
command -v docker >/dev/null 2>&1 || die "dockerd is installed but no docker client is on PATH"

# A dockerd of ours may be starting already (another run of this script): don't start a second.
pid=""
if [ -s /var/run/docker.pid ]; then
    pid=$(cat /var/run/docker.pid 2>/dev/null)
    if ! { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
        grep -q dockerd "/proc/$pid/comm" 2>/dev/null; }; then
        pid=""
    fi
fi
if [ -z "$pid" ]; then
    # Under systemd, prefer the unit; otherwise (containers, VMs without systemd) run it directly.
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 &&
        systemctl start docker >/dev/null 2>&1; then
        pid=systemd
    else
        mkdir -p "$(dirname "$LOG")"
        echo "--- $(date -Is) engine.sh starting dockerd" >>"$LOG"
        setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
        pid=$!
    fi
fi

start=$SECONDS
while ((SECONDS - start < WAIT_S)); do
    if engine_answers && sdk_answers; then
        echo "docker engine started: $(server_version) in $((SECONDS - start)) s (pid $pid, log $LOG)"
        exit 0
    fi
    if [ "$pid" != systemd ] && ! kill -0 "$pid" 2>/dev/null; then
        die "dockerd exited at start: $(grep -v '^---' "$LOG" | tail -n 1 | cut -c1-300) (log $LOG)"
    fi
    sleep 0.5
done
die "dockerd did not answer within ${WAIT_S} s: $(tail -n 1 "$LOG" 2>/dev/null | cut -c1-300) (log $LOG)"
