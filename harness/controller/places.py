"""Where this machine keeps what runs share beyond their run directories: the list of runs in
progress (and the local backend's address-slot locks) and scratch space for servers that run
as a user of their own. Nothing here imports the rest of the controller."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.errors import HarnessError


def active_dir() -> Path:
    for base in (Path("/run/lock-harness"), Path(f"/tmp/lock-harness-{os.getuid()}")):
        try:
            base.mkdir(parents=True, exist_ok=True)
            if os.access(base, os.W_OK):
                return base
        except OSError:
            continue
    raise HarnessError("no writable directory for the list of active runs (/run or /tmp)")


def scratch_dir(run_id: str) -> Path:
    """Where the local backend keeps the node directories of a DB that runs as a user of its
    own (PostgreSQL), for one run: a place that user can reach whatever the run directory's
    parents allow (a pytest tmp_path, /root/...). Removed at teardown and by ``harness clean``.
    """
    base = (Path("/var/lib/lock-harness/scratch") if os.geteuid() == 0
            else Path(f"/tmp/lock-harness-scratch-{os.getuid()}"))
    return base / run_id.replace("/", "__")
