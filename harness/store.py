"""The results store: ``<store>/<test-name>/<YYYYmmddTHHMMSS>/`` and ``<store>/latest``.

Also the machine-wide list of runs in progress, so ``harness clean`` finds what a run that died
left behind whatever store it used.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError


def new_run_dir(store: Path, test_name: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = store / test_name
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"cannot create the results store {base}: {e.strerror}") from None
    for n in range(1000):
        run = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            run.mkdir()
        except FileExistsError:
            continue
        return run.resolve()
    raise HarnessError(f"too many runs in {base} this second")


def point_latest(store: Path, run_dir: Path) -> None:
    link = store / "latest"
    tmp = store / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(run_dir, store.resolve()))
    tmp.replace(link)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def active_dir() -> Path:
    for base in (Path("/run/lock-harness"), Path(f"/tmp/lock-harness-{os.getuid()}")):
        try:
            base.mkdir(parents=True, exist_ok=True)
            if os.access(base, os.W_OK):
                return base
        except OSError:
            continue
    raise HarnessError("no writable directory for the list of active runs (/run or /tmp)")


def mark_active(run_dir: Path, run_id: str) -> Path:
    marker = active_dir() / (run_id.replace("/", "__") + ".json")
    from harness.procs import start_time

    write_json(marker, {"run_dir": str(run_dir), "run_id": run_id, "controller": os.getpid(),
                        "controller_started": start_time(os.getpid())})
    return marker


def active_runs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for marker in sorted(active_dir().glob("*.json")):
        try:
            out.append((marker, json.loads(marker.read_text())))
        except (OSError, ValueError):
            out.append((marker, {}))
    return out
