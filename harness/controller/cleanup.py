"""What runs leave behind, and removing it: the machine-wide list of runs in progress (so that
``harness clean`` finds a dead run's processes whatever store it used), its processes by pid,
its iptables rules by the project's chain and comment, its containers and networks by label."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.controller import netfilter, procs, syncfs_mounts, vdso_clock
from harness.controller.places import active_dir, scratch_dir
from harness.controller.store import RunDir
from harness.core.atomic import write_json
from harness.core.errors import HarnessError


def mark_active(run: RunDir, run_id: str) -> Path:
    marker = active_dir() / (run_id.replace("/", "__") + ".json")
    write_json(marker, {"run_dir": str(run.path), "run_id": run_id, "controller": os.getpid(),
                        "controller_started": procs.start_time(os.getpid())})
    return marker


def remove_stale_sockets(directory: Path) -> int:
    """The ssh master sockets of runs that died (nothing listens on them any more)."""
    removed = 0
    for path in directory.glob("*") if directory.is_dir() else []:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(path))
                continue  # a live master
            except ConnectionRefusedError:
                pass
            except OSError:
                continue
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def _hosts_file(run: RunDir) -> str | None:
    """The hosts file of a run on the ssh backend (its servers and rules are on those hosts)."""
    try:
        spec = run.load_test()["spec"]
    except HarnessError:
        return None
    hosts = spec.get("hosts")
    return str(hosts) if spec.get("backend") == "ssh" and isinstance(hosts, str) else None


def active_runs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for marker in sorted(active_dir().glob("*.json")):
        try:
            data = json.loads(marker.read_text())
        except (OSError, ValueError):
            data = {}
        out.append((marker, data if isinstance(data, dict) else {}))
    return out


@dataclass
class Cleaned:
    runs: int = 0
    rules: int = 0
    containers: int = 0
    networks: int = 0
    still_running: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    hosts_files: list[str] = field(default_factory=list)  # of dead ssh runs: clean those hosts


def clean(force: bool = False, say: Callable[[str], None] = print) -> Cleaned:
    """Remove what dead runs left (and, with ``force``, stop live ones)."""
    out = Cleaned()
    live_runs: set[str] = set()
    for marker, data in active_runs():
        run_id = str(data.get("run_id", marker.stem))
        controller = int(data.get("controller", 0) or 0)
        started = data.get("controller_started")
        if (controller and controller != os.getpid() and started is not None
                and procs.owned(controller, int(started))):
            if not force:
                say(f"run {run_id} is still in progress (controller pid {controller}); "
                    "use --force to stop it")
                out.still_running.append(run_id)
                live_runs.add(run_id.replace("/", ":"))
                continue
            os.kill(controller, signal.SIGKILL)
        run = RunDir(Path(str(data.get("run_dir", ""))))
        hosts = _hosts_file(run)
        if hosts is not None and hosts not in out.hosts_files:
            out.hosts_files.append(hosts)
        for pid in vdso_clock.reset_recorded(run.path) if run.path.is_dir() else []:
            say(f"undid the vDSO clock patch in pid {pid} of {run_id}")
        for directory in syncfs_mounts.unmount_recorded(run.path) if run.path.is_dir() else []:
            say(f"unmounted {directory} of {run_id}")
        killed = procs.kill_recorded(run.pids) if run.path.is_dir() else []
        for k in killed:
            say(f"killed {k} of {run_id}")
        out.killed.extend(killed)
        scratch = scratch_dir(run_id)
        if scratch.is_dir():
            shutil.rmtree(scratch, ignore_errors=True)
            say(f"removed {scratch} of {run_id}")
        marker.unlink(missing_ok=True)
        out.runs += 1
    remove_stale_sockets(active_dir() / "ssh")
    if shutil.which("dockerd") or os.path.exists("/var/run/docker.sock"):
        try:
            from harness.controller.backends import docker as docker_backend

            out.containers, out.networks = docker_backend.leftovers(
                docker_backend.client(), {r.replace(":", "/", 1) for r in live_runs})
        except HarnessError:
            pass
    if os.geteuid() == 0 and shutil.which("iptables"):
        try:
            out.rules = netfilter.remove_rules(lambda owner: owner not in live_runs)
            if not live_runs:  # a live run may be adding rules: its chains' jumps must stay
                netfilter.remove_chain_if_empty()
        except HarnessError as e:
            out.errors.append(str(e))
    return out
