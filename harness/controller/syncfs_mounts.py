"""Mounting the filesystem that forgets unsynced data (:mod:`harness.controller.syncfs`) over a
node's data directory, dropping its cache on command, unmounting it.

Each mount is a process of the run (``syncfs-<node>`` in its process table, its log in the
run's logs) and a line of ``<run>/syncfs/mounts.json``, so that ``harness clean`` unmounts what
a killed run left mounted (:func:`unmount_recorded`). What each drop forgot is appended to
``<run>/syncfs/<node>.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.controller.syncfs_orders import address, ask
from harness.core.atomic import write_json
from harness.core.errors import HarnessError

MOUNT_TIMEOUT = 10.0
FUSERMOUNT = "fusermount3"


def unavailable() -> str | None:
    """Why this machine cannot mount the filesystem (one line), or None."""
    if not os.path.exists("/dev/fuse"):
        return "power loss needs FUSE, and /dev/fuse is missing"
    if shutil.which(FUSERMOUNT) is None:
        return "power loss needs FUSE: fusermount3 not found (Debian package fuse3): run " \
               "`bash setup.sh`"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as e:
        return f"power loss needs FUSE: the mfusepy binding does not load ({e})"
    return None


def mounted(directory: Path, table: str = "/proc/self/mounts") -> bool:
    """Is ``directory`` a mount point in ``table`` (another mount namespace's: a process's
    ``/proc/PID/mounts``, where ``directory`` is a path of that namespace)?"""
    target = os.path.realpath(directory) if table == "/proc/self/mounts" else str(directory)
    try:
        with open(table) as fh:
            return any(line.split()[1] == target for line in fh)
    except OSError:
        return False


def unmount(directory: Path) -> bool:
    """Unmount ``directory`` (lazily, so a dead filesystem goes too); did anything go?"""
    if not mounted(directory):
        return False
    subprocess.run([FUSERMOUNT, "-u", "-z", str(directory)], capture_output=True, timeout=30,
                   check=False)
    return not mounted(directory)


class SyncMounts:
    """The run's mounts, by node name."""

    def __init__(self, run: RunDir, procs: ProcessTable) -> None:
        self.run = run
        self.procs = procs
        self.dir = run.path / "syncfs"
        self.dirs: dict[str, Path] = {}

    def mount(self, name: str, directory: Path) -> None:
        if name in self.dirs:
            return
        self.dir.mkdir(exist_ok=True)
        self.dirs[name] = directory
        write_json(self.dir / "mounts.json", {n: str(d) for n, d in self.dirs.items()})
        argv = [sys.executable, "-m", "harness.controller.syncfs_runner", str(directory),
                str(self.dir / f"{name}.jsonl")]
        self.procs.spawn(f"syncfs-{name}", argv, self.run.log(f"syncfs-{name}"))
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not mounted(directory):
            if self.procs.pid(f"syncfs-{name}") is None or time.monotonic() > deadline:
                raise HarnessError(f"{name}: the power-loss filesystem did not mount over "
                                   f"{directory}; see {self.run.log(f'syncfs-{name}')}")
            time.sleep(0.02)

    def drop(self, name: str) -> dict[str, Any]:
        """Forget the node's unsynced data: ``{"files": {path: bytes}, "bytes": n, ...}``."""
        return answer(ask(address(self.dirs[name]), "drop"))

    def write_back(self, name: str) -> dict[str, Any]:
        """Make everything the node's server wrote so far durable; what it wrote back."""
        return answer(ask(address(self.dirs[name]), "sync"))

    def unmount_all(self) -> None:
        for name, directory in self.dirs.items():
            unmount(directory)
            self.procs.wait_gone(f"syncfs-{name}", 5.0)


def answer(line: str) -> dict[str, Any]:
    """The filesystem's answer to ``drop`` or ``sync``, read."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise HarnessError(f"the power-loss filesystem answered {line[:100]!r}")
    return data


def unmount_recorded(run_path: Path) -> list[str]:
    """``harness clean``: unmount every directory a run recorded as mounted and still is."""
    try:
        dirs = json.loads((run_path / "syncfs" / "mounts.json").read_text())
    except (OSError, ValueError):
        return []
    return [str(d) for d in dirs.values() if unmount(Path(d))]
