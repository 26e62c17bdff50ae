#!/usr/bin/env bash
# Build Redis from Debian bookworm's source package with `make MALLOC=libc`, once, and cache it.
#
#   bash docker/build_redis_libc.sh [--force]      # prints the path of redis-server (stdout)
#
# Why: Debian's redis-server is linked with jemalloc, which libfaketime cannot hook (the server
# dies with "Unexpected recursive calls to clock_gettime()"). A libc-malloc build works with
# LD_PRELOAD=libfaketime, so clock faults can reach Redis (local backend and docker image alike).
#
# Cache: ${LOCK_HARNESS_CACHE:-/var/cache/lock-harness}/redis-libc/{redis-server,redis-cli,
#        redis-sentinel,BUILD-INFO}. A cached build is reused as is (no network); --force rebuilds.
# The source comes from deb-src entries for bookworm and bookworm-security (with Debian's
# security patches), through a private apt state: the host's apt configuration is not touched.
# Needs: root for apt-get (only when build tools are missing), gcc, make, dpkg-dev.
# Also used by docker/Dockerfile (builder stage), so both image paths get the same binary.
set -euo pipefail

CACHE=${LOCK_HARNESS_CACHE:-/var/cache/lock-harness}
OUT=$CACHE/redis-libc
SUITE=bookworm
MIRROR=${LOCK_HARNESS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${LOCK_HARNESS_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Build flags: libc malloc (the point), no TLS and no systemd so the binary needs only libc/libm.
MAKE_FLAGS=(MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no)
BINS=(redis-server redis-cli redis-sentinel)

FORCE=0
for arg in "$@"; do
    case $arg in
        --force) FORCE=1 ;;
        -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "build_redis_libc.sh: unknown argument: $arg (usage: [--force])" >&2; exit 64 ;;
    esac
done

die() { echo "build_redis_libc.sh: $*" >&2; exit 1; }
say() { echo "build_redis_libc.sh: $*" >&2; }

cached_ok() {
    local b
    for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || return 1; done
    "$OUT/redis-server" --version 2>/dev/null | grep -q 'malloc=libc'
}

if [ "$FORCE" = 0 ] && cached_ok; then
    echo "$OUT/redis-server"
    exit 0
fi

mkdir -p "$CACHE"
# One build at a time (the image build and a user may both ask).
exec 9>"$CACHE/.redis-libc.lock"
flock -w 900 9 || die "another build holds $CACHE/.redis-libc.lock for more than 15 min"
if [ "$FORCE" = 0 ] && cached_ok; then   # built by whoever held the lock
    echo "$OUT/redis-server"
    exit 0
fi

start=$SECONDS
need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing build tools (${need[*]}) and not root to apt-get them"
    say "installing build tools: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q --no-install-recommends "${need[@]}" ||
        { apt-get update -q && apt-get install -y -q --no-install-recommends "${need[@]}"; }; } \
        >/tmp/lock-harness-redis-apt.log 2>&1 ||
        die "apt-get install ${need[*]} failed (see /tmp/lock-harness-redis-apt.log)"
fi

WORK=$(mktemp -d /tmp/lock-harness-redis-src.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/archives/partial"
cat >"$WORK/sources.list" <<EOF
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $SECURITY_MIRROR $SUITE-security main
EOF
APT=(apt-get -q
    -o "Dir::Etc::SourceList=$WORK/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
    -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache::archives=$WORK/archives"
    -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
    -o "APT::Sandbox::User=root" -o "APT::Get::List-Cleanup=0")

say "fetching Debian's redis source package ($SUITE + $SUITE-security) ..."
"${APT[@]}" update >"$WORK/apt.log" 2>&1 || die "apt-get update (deb-src) failed: $(tail -n 1 "$WORK/apt.log")"
(cd "$WORK" && "${APT[@]}" source --only-source redis >>"$WORK/apt.log" 2>&1) ||
    die "apt-get source redis failed: $(tail -n 1 "$WORK/apt.log")"
SRC=$(find "$WORK" -maxdepth 1 -type d -name 'redis-7.0.*' | head -n 1)
[ -n "$SRC" ] || die "no redis-7.0.* source tree after apt-get source (got: $(ls "$WORK" | tr '\n' ' '))"
DSC=$(basename "$(ls "$WORK"/redis_*.dsc)")

say "building $(basename "$SRC") ($DSC) with make ${MAKE_FLAGS[*]} -j$(nproc) ..."
make -C "$SRC" -j"$(nproc)" "${MAKE_FLAGS[@]}" >"$WORK/make.log" 2>&1 ||
    die "make failed: $(grep -m1 -iE 'error' "$WORK/make.log" || tail -n 1 "$WORK/make.log")"

STAGE=$(mktemp -d "$CACHE/.redis-libc.new.XXXXXX")
chmod 0755 "$STAGE"   # mktemp makes it 0700; non-root users run these binaries too
for b in "${BINS[@]}"; do install -m 0755 "$SRC/src/$b" "$STAGE/$b"; done
"$STAGE/redis-server" --version | grep -q 'malloc=libc' ||
    die "built redis-server does not report malloc=libc: $("$STAGE/redis-server" --version)"
{
    echo "source: $DSC (Debian $SUITE + $SUITE-security deb-src)"
    echo "make: ${MAKE_FLAGS[*]}"
    echo "version: $("$STAGE/redis-server" --version)"
    echo "built: $(date -Is) on $(. /etc/os-release && echo "$PRETTY_NAME")"
} >"$STAGE/BUILD-INFO"
rm -rf "$OUT.old"
[ -d "$OUT" ] && mv "$OUT" "$OUT.old"
mv "$STAGE" "$OUT"
rm -rf "$OUT.old"
say "built $(sed -n 's/^version: //p' "$OUT/BUILD-INFO") in $((SECONDS - start)) s -> $OUT"
echo "$OUT/redis-server"
