#!/usr/bin/env bash
# Runs as root INSIDE the node's root filesystem, with network: in the debootstrapped chroot
# (docker/build_image.py) and in docker/Dockerfile. It installs packages.txt (the node's Debian
# packages, one a line, as the DB classes declare them: `python3 -m harness.controller.packages
# --image` writes it), checks the result, and trims the tree. Expects packages.txt beside it and
# Redis already in /usr/local/bin (the libc-malloc build: first on PATH).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

# No service starts at install time (no init runs in a node anyway).
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d

# PostgreSQL: no default cluster at install time (the harness runs initdb per node, per run).
mkdir -p /etc/postgresql-common
echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf

mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$HERE/packages.txt" | grep -v '^$')
apt-get update -q
apt-get install -y -q --no-install-recommends "${pkgs[@]}"

# dynalite (DynamoDB's API, the dynamodb DB) from npm's registry, where the DB looks for it,
# unless docker/build_image.py copied this machine's install in (JavaScript and N-API builds);
# keep in step with dbs/dynamodb.py (DYNALITE, DEFAULT_DIR: tests/test_dynamodb.py checks).
[ -e /opt/lock-harness/dynalite/node_modules/dynalite/cli.js ] ||
  npm install --prefix /opt/lock-harness/dynalite --no-audit --no-fund --no-save \
    --loglevel=error dynalite@4.0.0
rm -rf /root/.npm

# ZooKeeper: Debian's postinst points /etc/zookeeper/conf at conf_example; make sure it did.
[ -e /etc/zookeeper/conf/environment ] || ln -sfn /etc/zookeeper/conf_example /etc/zookeeper/conf
# The power-loss filesystem (harness/controller/syncfs.py, mounted from the host's package)
# runs in a node on Debian's python3 and fuse3, with mfusepy (pure Python) from PyPI: the wheel
# docker/build_image.py downloaded with the host's pip (wheels/ beside this script), or PyPI.
MFUSEPY='mfusepy>=3.1,<4'
if [ -d "$HERE/wheels" ]; then
    python3 -m pip install -q --no-cache-dir --break-system-packages --isolated --no-index \
        --find-links "$HERE/wheels" "$MFUSEPY"
else
    python3 -m pip install -q --no-cache-dir --break-system-packages --isolated "$MFUSEPY"
fi
python3 -c 'import mfusepy' || { echo "rootfs-setup.sh: mfusepy does not load" >&2; exit 1; }

mkdir -p /var/lib/zookeeper /var/log/zookeeper /var/lib/etcd /data

# Sanity: everything a node runs is there and Redis is the libc-malloc build.
for f in /usr/local/bin/redis-server /usr/local/bin/redis-cli /usr/local/bin/redis-sentinel \
    /usr/bin/etcd /usr/bin/etcdctl /usr/bin/java /usr/share/zookeeper/bin/zkServer.sh \
    /usr/share/java/zookeeper.jar /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 \
    /usr/bin/faketime /usr/sbin/iptables /usr/sbin/ip /usr/bin/pkill /usr/bin/fusermount3 \
    /usr/bin/python3 \
    /usr/lib/postgresql/15/bin/postgres /usr/lib/postgresql/15/bin/initdb /usr/sbin/sshd \
    /usr/bin/node /opt/lock-harness/dynalite/node_modules/dynalite/cli.js; do
    [ -e "$f" ] || { echo "rootfs-setup.sh: missing $f" >&2; exit 1; }
done
/usr/local/bin/redis-server --version | grep -q 'malloc=libc' ||
    { echo "rootfs-setup.sh: /usr/local/bin/redis-server is not a malloc=libc build" >&2; exit 1; }

# Trim: package lists, caches, docs we never read.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old \
    /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /usr/share/doc/* /usr/share/man/* \
    /usr/share/info/* /root/.cache
find /tmp -mindepth 1 -maxdepth 1 ! -path "$HERE" -exec rm -rf {} +   # the caller removes $HERE
echo "rootfs-setup.sh: node root filesystem ready"
