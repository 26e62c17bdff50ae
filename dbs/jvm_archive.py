"""A class-data-sharing (AppCDS) archive for a JVM server started on this machine.

A JVM spends most of its start-up loading and verifying classes; three ZooKeeper JVMs starting
at once on two cores pay that three times. An AppCDS archive holds those classes parsed and
verified, mapped from one file, and cuts the time from start to a serving ensemble by about a
fifth here. It is built from the JVM's own record of what it loaded, without any download:

1. a run with no archive yet has its first node write the classes it loads
   (``-XX:DumpLoadedClassList``) into the cache;
2. a later run finds that list (complete: untouched for a while) and dumps the archive from it
   (``java -Xshare:dump``, about 2 s, once per machine), into a temporary file renamed in place;
3. every later run maps it (``-XX:SharedArchiveFile``).

Nothing here can break a run: the archive's name hashes the JVM, the class path (each jar's size
and time) and the flags, so a changed JVM or jar gets a new archive; a list the JVM cannot dump
is deleted and recorded anew (one cut mid-line by a killed node still dumps: the JVM skips what
it cannot read); a JVM that cannot use an archive runs without it
(``-Xshare:auto``, the default). The cache is ``$XDG_CACHE_HOME/lock-harness/cds`` (else
``~/.cache/...``), or ``$LOCK_HARNESS_CDS`` (``off`` turns the archive off).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

SETTLED = 10.0  # seconds a class list must be untouched before it is taken as complete
DUMP_TIMEOUT = 120.0


def cache_dir() -> Path | None:
    chosen = os.environ.get("LOCK_HARNESS_CDS")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lock-harness" / "cds"


def archive_name(name: str, java: str, classpath: Sequence[str], flags: Sequence[str]) -> str:
    """``NAME-HASH``: what the archive was dumped from and for."""
    h = hashlib.sha256()
    real = os.path.realpath(java)
    modules = Path(real).parents[1] / "lib" / "modules"  # the JDK's own classes
    for path in (real, str(modules), *classpath):
        try:
            st = os.stat(path)
            h.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{path}:missing\n".encode())
    h.update("\n".join(flags).encode())
    return f"{name}-{h.hexdigest()[:16]}"


class JvmArchive:
    """The archive of one server program (a JVM, its class path, its flags)."""

    def __init__(self, name: str, java: str, classpath: Sequence[str],
                 flags: Sequence[str]) -> None:
        self.java = java
        self.classpath = list(classpath)
        self.flags = list(flags)
        self.dir = cache_dir()
        self.stem = archive_name(name, java, classpath, flags)

    @property
    def archive(self) -> Path | None:
        return None if self.dir is None else self.dir / f"{self.stem}.jsa"

    def flags_for(self, first_node: bool) -> list[str]:
        """The JVM flags of a node started now: map the archive if there is one (building it
        first from a settled class list), else have the first node record its classes."""
        if self.dir is None or self.archive is None:
            return []
        if self.archive.exists():
            return [f"-XX:SharedArchiveFile={self.archive}"]
        if self.build():
            return [f"-XX:SharedArchiveFile={self.archive}"]
        if not first_node or any(self.dir.glob(f"{self.stem}.*.lst")):
            return []  # one list at a time is enough
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            return []
        return [f"-XX:DumpLoadedClassList={self.dir / f'{self.stem}.{os.getpid()}.lst'}"]

    def build(self) -> bool:
        """Dump the archive from a settled class list; True if it exists now."""
        assert self.dir is not None and self.archive is not None
        lists = [p for p in self.dir.glob(f"{self.stem}.*.lst")
                 if time.time() - p.stat().st_mtime > SETTLED] if self.dir.is_dir() else []
        for class_list in lists:
            tmp = self.archive.with_suffix(f".{os.getpid()}.tmp")
            try:
                done = subprocess.run(
                    [self.java, "-Xshare:dump", *self.flags,
                     f"-XX:SharedClassListFile={class_list}", f"-XX:SharedArchiveFile={tmp}",
                     "-cp", ":".join(self.classpath)],
                    stdin=subprocess.DEVNULL, capture_output=True, timeout=DUMP_TIMEOUT)
                if done.returncode == 0 and tmp.exists():
                    os.replace(tmp, self.archive)
                    class_list.unlink(missing_ok=True)
                    return True
            except (OSError, subprocess.SubprocessError):
                pass
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                class_list.unlink(missing_ok=True)  # cut short or unusable: record anew
        return self.archive.exists()
