"""What runs leave behind, and removing it: the machine-wide list of runs in progress (so that
``harness clean`` finds a dead run's processes whatever store it used), its processes by pid,
its iptables rules by the project's chain and comment, its containers and networks by label.
``harness clean --store DIR`` touches only the dead runs of that store and what they recorded
(their processes, mounts, scratch, rules and containers by their run ids), never a sweep of
the machine: a test cleans up what it made, beside tests and runs it did not make."""

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


def _run_ids() -> set[str]:
    """The run id of every run marked in progress now."""
    return {str(data.get("run_id", marker.stem)) for marker, data in active_runs()}


def _within(run_dir: object, store: Path) -> bool:
    return Path(str(run_dir or "/")).resolve().is_relative_to(store.resolve())


def clean(force: bool = False, say: Callable[[str], None] = print, store: Path | None = None
          ) -> Cleaned:
    """Remove what dead runs left (and, with ``force``, stop live ones): of every run on this
    machine, or (``store``) only of that store's runs."""
    out = Cleaned()
    live_runs: set[str] = set()
    gone: set[str] = set()  # the run ids cleaned here
    for marker, data in active_runs():
        if store is not None and not _within(data.get("run_dir"), store):
            continue
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
        gone.add(run_id)
        out.runs += 1
    remove_stale_sockets(active_dir() / "ssh")
    if store is not None:  # a store's runs that unmarked themselves may still leave labelled
        gone |= {f"{d.parent.name}/{d.name}" for d in store.glob("*/*") if d.is_dir()
                 and f"{d.parent.name}:{d.name}" not in live_runs}  # things (a SIGINT's race)
    # A sweep keeps the runs marked when it looks (after it listed what it may remove: a run
    # marks itself before it makes anything), not only those found live above: a run that
    # started meanwhile is no leftover.
    if shutil.which("dockerd") or os.path.exists("/var/run/docker.sock"):
        try:
            from harness.controller.backends import docker as docker_backend

            c = docker_backend.client()
            if store is None:
                out.containers, out.networks = docker_backend.leftovers(c, _run_ids)
            for run_id in sorted(gone) if store is not None else []:
                n = docker_backend.remove_run(c, run_id)
                out.containers, out.networks = out.containers + n[0], out.networks + n[1]
        except HarnessError:
            pass
    if os.geteuid() == 0 and shutil.which("iptables"):
        ours = {r.replace("/", ":") for r in gone}
        try:
            out.rules = netfilter.remove_rules(
                ours.__contains__ if store is not None else
                lambda owner: owner not in {r.replace("/", ":") for r in _run_ids()})
            if store is None and not _run_ids():  # a run may be adding rules: its jumps stay
                netfilter.remove_chain_if_empty()
        except HarnessError as e:
            out.errors.append(str(e))
    return out
