"""Building the external lock clients of ``clients/<name>/``, offline, cached by source hash.

Each client is a folder under ``clients/`` with a ``build.sh OUT`` that builds it, from its
ecosystem's own packages (Debian's jars and Go sources, npm's registry), into the directory
``OUT``: the programs the locks start are files in ``OUT``. The output is cached under
``/var/cache/lock-harness/clients/<name>-<hash>/`` (``LOCK_HARNESS_CLIENT_CACHE`` moves it),
where the hash covers every file of the folder, so a changed source is a new build and an
unchanged one is never built twice. A build goes to a temporary directory first and is
renamed into place when complete: a half-built client is never taken for a built one.

    python -m workloads.external.builds            # build every client (setup.sh does)
    python -m workloads.external.builds curator    # one; --force rebuilds
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.core.shipped import shipped

CLIENTS = shipped("clients")  # the checkout's, or the installed package's
DEFAULT_CACHE = Path("/var/cache/lock-harness/clients")
COMPLETE = ".complete"  # written last into a finished build
BUILD_TIMEOUT = 900.0


def cache_root() -> Path:
    return Path(os.environ.get("LOCK_HARNESS_CLIENT_CACHE", str(DEFAULT_CACHE)))


def names() -> list[str]:
    """Every client folder (one with a build.sh)."""
    if not CLIENTS.is_dir():
        return []
    return sorted(p.name for p in CLIENTS.iterdir() if (p / "build.sh").is_file())


def source_files(name: str) -> list[Path]:
    root = CLIENTS / name
    return sorted((p for p in root.rglob("*") if p.is_file()
                   and not any(part.startswith(".") or part == "node_modules"
                               for part in p.relative_to(root).parts)),
                  key=lambda p: p.relative_to(root).as_posix())


def source_hash(name: str) -> str:
    """sha256 over the folder's files, names and contents (16 hex digits)."""
    root = CLIENTS / name
    digest = hashlib.sha256()
    for path in source_files(name):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def output_dir(name: str) -> Path:
    return cache_root() / f"{name}-{source_hash(name)}"


def built(name: str) -> Path | None:
    """The finished build of the current sources, or None."""
    if not (CLIENTS / name / "build.sh").is_file():
        return None
    out = output_dir(name)
    return out if (out / COMPLETE).is_file() else None


def failure_log(name: str) -> Path:
    return cache_root() / f"{name}-{source_hash(name)}.failed.log"


def not_built_reason(name: str) -> str:
    """Why ``name`` is not built, in one line, with what to do."""
    fix = f"build it with `python -m workloads.external.builds {name}`"
    log = failure_log(name)
    if log.is_file():
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
        last = lines[-1].strip() if lines else "no output"
        return f"its last build failed ({last[:160]}; log {log}); {fix}"
    return f"not built; {fix} (`harness setup --clients` builds every client)"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(name: str, *, force: bool = False) -> tuple[Path, bool]:
    """Build ``name`` unless its current sources are built: (output dir, built now).
    RuntimeError (one line) when the build fails; its log stays next to the cache."""
    script = CLIENTS / name / "build.sh"
    if not script.is_file():
        raise RuntimeError(f"no client {name!r} (clients: {', '.join(names())})")
    with _locked(name):
        out = output_dir(name)
        if (out / COMPLETE).is_file() and not force:
            return out, False
        tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log = failure_log(name)
        log.unlink(missing_ok=True)
        with (tmp / "build.log").open("wb") as fh:
            try:
                proc = subprocess.run(["bash", str(script), str(tmp)], cwd=script.parent,
                                      stdout=fh, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT,
                                      env={**os.environ, "LOCK_HARNESS_CACHE":
                                           str(cache_root())})
                code: int | str = proc.returncode
            except subprocess.TimeoutExpired:
                code = f"timeout after {BUILD_TIMEOUT:g} s"
        if code != 0:
            shutil.copyfile(tmp / "build.log", log)
            shutil.rmtree(tmp, ignore_errors=True)
            lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
            last = lines[-1].strip() if lines else "no output"
            raise RuntimeError(f"building {name} failed ({code}): {last[:200]} (log: {log})")
        (tmp / COMPLETE).write_text(f"{source_hash(name)}\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        for old in cache_root().glob(f"{name}-*"):  # earlier builds of other sources
            if old != out and old.is_dir() and not old.name.endswith(".failed.log"):
                shutil.rmtree(old, ignore_errors=True)
        return out, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.external.builds",
                                     description="build the external lock clients (cached)")
    parser.add_argument("names", nargs="*", help=f"clients (default: all: {', '.join(names())})")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    failed = 0
    for name in args.names or names():
        began = time.monotonic()
        try:
            out, fresh = build(name, force=args.force)
        except RuntimeError as e:
            failed += 1
            print(f"clients: {name}: {e}", file=sys.stderr)
            continue
        what = f"built in {time.monotonic() - began:.0f} s" if fresh else "up to date"
        print(f"clients: {name} {what} ({out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
