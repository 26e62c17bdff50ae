#!/usr/bin/env python3
"""Build the lock-harness node image without any registry: debootstrap + `docker import`.

    .venv/bin/python docker/build_image.py [--force] [--print-tag] [--print-packages]

The image is ``lock-harness/node:<hash>`` (also tagged ``lock-harness/node:latest``), where
<hash> is a content hash of the recipe (RECIPE_FILES below, and the node's Debian packages,
which ``python3 -m harness.controller.packages --image`` derives from the DB classes): it is
rebuilt only when the recipe changes. It is labelled ``lock-harness=1`` and
``lock-harness.recipe=<hash>``.

Stages (each cached, so later runs skip what they can):
  1. engine     docker/engine.sh: a Docker engine answers (started if need be).
  2. image      already present for this hash: done.
  3. rootfs     ``$CACHE/rootfs-<hash>.tar`` present: skip to 4. Otherwise:
     a. redis    docker/build_redis_libc.sh (``$CACHE/redis-libc/``, reused as is);
     b. base     ``debootstrap --variant=minbase bookworm``, cached as a tarball;
     c. packages docker/rootfs-setup.sh in a chroot (installs the derived packages);
     d. tarball  written to ``$CACHE/rootfs-<hash>.tar``.
  4. import     ``docker import`` the tarball, tag, label; smoke-check malloc=libc.
$CACHE is $LOCK_HARNESS_CACHE or /var/cache/lock-harness. --force ignores every cache.

The only stdout line is the image tag; progress (stages, elapsed time) goes to stderr.
Exit 0 built or present, 1 build failed (one line says why), 64 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECIPE_FILES = ("build_image.py", "build_redis_libc.sh", "rootfs-setup.sh")
REPOSITORY = "lock-harness/node"
LABEL = "lock-harness"
CACHE = Path(os.environ.get("LOCK_HARNESS_CACHE", "/var/cache/lock-harness"))
SUITE = "bookworm"
VARIANT = "minbase"
MIRROR = os.environ.get("LOCK_HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get(
    "LOCK_HARNESS_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security"
)
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REDIS_BINARIES = ("redis-server", "redis-cli", "redis-sentinel")
NODE_WHEELS = "mfusepy>=3.1,<4"  # the power-loss filesystem's binding (rootfs-setup.sh)
HEARTBEAT_S = 15.0
# dynalite as `harness setup --db dynamodb` installed it here (dbs/dynamodb.py), copied into
# the node when present (npm's registry may not be reachable from the chroot)
DYNALITE = Path(os.environ.get("LOCK_HARNESS_DYNALITE", "/opt/lock-harness/dynalite"))


class BuildError(Exception):
    """A build step failed; str() is the one line shown to the user."""


@functools.cache
def package_list() -> str:
    """The node's Debian packages, one a line, as the DB classes declare them (derived by
    harness.controller.packages, with the standard library alone)."""
    proc = subprocess.run([sys.executable, "-m", "harness.controller.packages", "--image"],
                          cwd=HERE.parent, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BuildError(f"no package list (harness.controller.packages exited "
                         f"{proc.returncode}): {proc.stderr.strip()[-300:]}")
    return proc.stdout


def recipe_hash() -> str:
    """12 hex digits of sha256 over the recipe files' names and contents and the packages."""
    h = hashlib.sha256()
    for name in sorted(RECIPE_FILES):
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    h.update(b"packages.txt\0" + package_list().encode() + b"\0")
    return h.hexdigest()[:12]


def image_tag(digest: str | None = None) -> str:
    return f"{REPOSITORY}:{digest or recipe_hash()}"


class Progress:
    """Stage lines with the elapsed time since the start, on stderr."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.say(f"{name} ...")
        t = time.monotonic()
        yield
        self.say(f"{name}: done in {time.monotonic() - t:.1f}s")


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - 4096))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:160] if lines else ""


def run(
    cmd: Sequence[str | os.PathLike[str]],
    log: Path,
    progress: Progress,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> None:
    """Run cmd with its output appended to log; print a heartbeat; raise BuildError on failure."""
    argv = [os.fspath(c) for c in cmd]
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        start = last_beat = time.monotonic()
        while True:
            try:
                rc = proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if now - start > timeout_s:
                    proc.kill()
                    proc.wait()
                    raise BuildError(
                        f"{Path(argv[0]).name} took more than {timeout_s:.0f}s (log {log})"
                    ) from None
                if now - last_beat >= HEARTBEAT_S:
                    last_beat = now
                    progress.say(f"    ... {now - start:.0f}s: {_last_line(log)}")
    if rc != 0:
        raise BuildError(f"{Path(argv[0]).name} exited {rc}: {_last_line(log)} (log {log})")


def docker_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise BuildError("no docker client on PATH (run docker/engine.sh)") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"docker {args[0]} did not answer within {timeout_s:.0f}s") from None


def image_exists(tag: str) -> bool:
    return docker_cli("image", "inspect", "--format", "{{.Id}}", tag).returncode == 0


def ensure_engine(progress: Progress) -> None:
    proc = subprocess.run(
        ["bash", str(HERE / "engine.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise BuildError(lines[-1] if lines else f"docker/engine.sh exited {proc.returncode}")
    progress.say(proc.stdout.strip())


def ensure_debootstrap(progress: Progress, log: Path) -> None:
    if shutil.which("debootstrap"):
        return
    progress.say("installing debootstrap (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "debootstrap", "debian-archive-keyring"]
    try:
        run(install, log, progress, 600, env)
    except BuildError:
        run(["apt-get", "update", "-q"], log, progress, 600, env)
        run(install, log, progress, 600, env)


def mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve())
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def remove_tree(root: Path) -> None:
    """rm -rf a build root, refusing if anything is still mounted in it."""
    if not root.exists():
        return
    busy = mounts_under(root)
    if busy:
        raise BuildError(f"{busy[0]} is still mounted: unmount it before rebuilding")
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


def atomic_tar(src_dir: Path, dest: Path, log: Path, progress: Progress) -> None:
    part = dest.with_name(dest.name + ".part")
    part.unlink(missing_ok=True)
    run(
        ["tar", "-C", src_dir, "--numeric-owner", "--one-file-system", "-cf", part, "."],
        log,
        progress,
        1200,
    )
    part.replace(dest)


def build_rootfs(digest: str, tarball: Path, force: bool, progress: Progress) -> None:
    build_dir = CACHE / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / f"build-{digest}.log"
    log.write_text("")
    progress.say(f"build log: {log}")
    root = build_dir / f"rootfs-{digest}"
    remove_tree(root)

    with progress.stage("redis (libc malloc build from Debian's source, cached)"):
        cmd = ["bash", str(HERE / "build_redis_libc.sh"), *(["--force"] if force else [])]
        run(cmd, log, progress, 1800)
        redis_dir = CACHE / "redis-libc"
        progress.say(f"    {(redis_dir / 'BUILD-INFO').read_text().splitlines()[2]}")

    base_key = hashlib.sha256(f"{SUITE} {VARIANT} {MIRROR}".encode()).hexdigest()[:8]
    base_tar = CACHE / f"debootstrap-{SUITE}-{VARIANT}-{base_key}.tar"
    root.mkdir()
    if base_tar.exists() and not force:
        with progress.stage(f"base (cached {base_tar.name})"):
            run(["tar", "-C", root, "--numeric-owner", "-xpf", base_tar], log, progress, 600)
    else:
        ensure_debootstrap(progress, log)
        with progress.stage(f"base (debootstrap --variant={VARIANT} {SUITE})"):
            cmd = ["debootstrap", f"--variant={VARIANT}", SUITE, root, MIRROR]
            if KEYRING.exists():  # e.g. on Ubuntu hosts, whose default keyring is not Debian's
                cmd.insert(1, f"--keyring={KEYRING}")
            run(cmd, log, progress, 1800)
            atomic_tar(root, base_tar, log, progress)

    with progress.stage("packages (docker/rootfs-setup.sh in a chroot)"):
        (root / "etc/apt/sources.list").write_text(
            f"deb {MIRROR} {SUITE} main\n"
            f"deb {MIRROR} {SUITE}-updates main\n"
            f"deb {SECURITY_MIRROR} {SUITE}-security main\n"
        )
        resolv = root / "etc/resolv.conf"
        resolv.unlink(missing_ok=True)
        shutil.copyfile("/etc/resolv.conf", resolv)
        for name in REDIS_BINARIES:
            dest = root / "usr/local/bin" / name
            shutil.copyfile(CACHE / "redis-libc" / name, dest)
            dest.chmod(0o755)
        info = root / "usr/local/share/lock-harness/redis-BUILD-INFO"
        info.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CACHE / "redis-libc" / "BUILD-INFO", info)
        if (DYNALITE / "node_modules" / "dynalite" / "cli.js").is_file():  # harness setup's
            shutil.copytree(DYNALITE, root / "opt/lock-harness/dynalite", symlinks=True)
        setup = root / "tmp/lock-harness"
        setup.mkdir(parents=True)
        shutil.copyfile(HERE / "rootfs-setup.sh", setup / "rootfs-setup.sh")
        (setup / "packages.txt").write_text(package_list())
        # The node's Python libraries, fetched by the host's pip (its index and certificates):
        # rootfs-setup.sh installs them from there.
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest",
             setup / "wheels", NODE_WHEELS], log, progress, 300)
        # A private mount namespace: /proc, /sys, /dev vanish with it, even if we are killed.
        script = (
            'set -e; R="$1"; mount -t proc proc "$R/proc"; mount -t sysfs sysfs "$R/sys"; '
            'mount --rbind /dev "$R/dev"; '
            'exec chroot "$R" /bin/bash /tmp/lock-harness/rootfs-setup.sh'
        )
        env = {"PATH": PATH_ENV, "HOME": "/root", "LC_ALL": "C", "TERM": "dumb"}
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
        run([*cmd, "sh", root], log, progress, 2400, env)
        shutil.rmtree(setup)
        resolv.write_text("")  # docker bind-mounts its own
        (root / "etc/lock-harness-image").write_text(f"recipe {digest}\n")

    with progress.stage(f"tarball ({tarball})"):
        if mounts_under(root):
            raise BuildError(f"{mounts_under(root)[0]} is still mounted after the chroot step")
        atomic_tar(root, tarball, log, progress)
        progress.say(f"    {tarball.stat().st_size / 2**20:.0f} MiB")
        remove_tree(root)
        for old in CACHE.glob("rootfs-*.tar"):
            if old != tarball:
                old.unlink(missing_ok=True)


def import_image(digest: str, tarball: Path, progress: Progress) -> str:
    tag = image_tag(digest)
    with progress.stage(f"import ({tag})"):
        proc = docker_cli(
            "import",
            "--change", f"ENV PATH={PATH_ENV}",
            "--change", f"LABEL {LABEL}=1 {LABEL}.recipe={digest}",
            "--change", 'CMD ["/bin/bash"]',
            "--message", f"lock-harness node image, recipe {digest}",
            str(tarball), tag,
            timeout_s=1200,
        )  # fmt: skip
        if proc.returncode != 0:
            raise BuildError(f"docker import failed: {proc.stderr.strip().splitlines()[-1:]}")
    return tag


def tag_latest(tag: str) -> None:
    proc = docker_cli("tag", tag, f"{REPOSITORY}:latest")
    if proc.returncode != 0:
        raise BuildError(f"docker tag failed: {proc.stderr.strip()}")


def finish(tag: str, digest: str) -> None:
    """Tag latest, smoke-check, drop our images of older recipes that no container uses."""
    tag_latest(tag)
    proc = docker_cli("run", "--rm", "--network", "none", tag, "redis-server", "--version")
    if proc.returncode != 0 or "malloc=libc" not in proc.stdout:
        raise BuildError(
            f"smoke check failed: redis-server --version gave {proc.stdout.strip()!r}"
            f" {proc.stderr.strip()!r}"
        )
    listing = docker_cli("images", REPOSITORY, "--format", "{{.Tag}}").stdout.split()
    for old in listing:
        if old not in (digest, "latest", "<none>"):
            docker_cli("rmi", f"{REPOSITORY}:{old}")  # fails harmlessly if still in use
    # An image this tag pointed at before a --force rebuild is left untagged: ours, so drop it.
    docker_cli("image", "prune", "--force", "--filter", f"label={LABEL}=1")


def build(force: bool, progress: Progress) -> str:
    digest = recipe_hash()
    tag = image_tag(digest)
    ensure_engine(progress)
    if not force and image_exists(tag):
        progress.say(f"image {tag} present (recipe unchanged)")
        tag_latest(tag)
        return tag
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"rootfs-{digest}.tar"
    lock = (CACHE / ".build-image.lock").open("w")
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress.say("another build_image.py is running; waiting for it (at most 60 min)")
            deadline = time.monotonic() + 3600
            while True:
                time.sleep(2)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise BuildError("another build held the lock for 60 min") from None
            if not force and image_exists(tag):
                tag_latest(tag)
                return tag
        if os.geteuid() != 0 and (force or not tarball.exists()):
            raise BuildError("building the root filesystem needs root (debootstrap, chroot)")
        if force or not tarball.exists():
            build_rootfs(digest, tarball, force, progress)
        else:
            progress.say(f"rootfs tarball cached: {tarball}")
        import_image(digest, tarball, progress)
        finish(tag, digest)
    return tag


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build the lock-harness node image offline (debootstrap + docker import)."
    )
    parser.add_argument("--force", action="store_true", help="ignore every cache and rebuild")
    parser.add_argument(
        "--print-tag", action="store_true", help="print the tag for this recipe and exit"
    )
    parser.add_argument(
        "--print-packages", action="store_true",
        help="print the Debian packages the image installs and exit (a dry run of that step)",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 64
    try:
        if args.print_tag or args.print_packages:
            print(image_tag() if args.print_tag else package_list().strip())
            return 0
    except BuildError as e:
        print(f"build_image.py: {e}", file=sys.stderr)
        return 1
    progress = Progress()
    try:
        tag = build(args.force, progress)
    except BuildError as e:
        print(f"build_image.py: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"build_image.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("build_image.py: interrupted", file=sys.stderr)
        return 130
    progress.say(f"ready: {tag} (also {REPOSITORY}:latest)")
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
