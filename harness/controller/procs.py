"""Processes a run starts, recorded by pid in the run directory so that teardown, Ctrl-C and
``harness clean`` stop exactly those and nothing else.

A pid is only ever signalled after checking that it is still the same process: its start time
(field 22 of /proc/<pid>/stat, recorded when it was spawned) must match, so a recycled pid is
never hit. (Command lines are no proof: redis-server rewrites its own.)

Every process is started in a session (and so a process group) of its own. Signals that stand
for a fault on a whole server (pause, kill) go to the whole tree: its process group and every
descendant (PostgreSQL's backends each lead a session of their own), so a server of several
processes is frozen or crashed whole, as a machine would be.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from harness.core.atomic import write_json
from harness.core.lifetime import die_with_parent


def _stat(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()  # fields from 3 (state) on


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot), or None if it is gone or a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] == "Z":
        return None
    return int(fields[19])


def owned(pid: int, started: int | None) -> bool:
    """Is ``pid`` alive and still the process that started at ``started``?"""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def children() -> dict[int, list[int]]:
    """Every living process's children, by parent: one scan of /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and fields[0] != "Z":
            out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """Every living descendant of ``pid``, parents before children: as the kernel lists each
    process's children (:func:`kernel_descendants`), else from ``tree``, a scan of
    :func:`children` (a new one when not given)."""
    if tree is None:
        found = kernel_descendants(pid)
        if found is not None:
            return found
        tree = children()
    out: list[int] = []
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo.extend(tree.get(child, []))
    return out


def kernel_descendants(pid: int) -> list[int] | None:
    """:func:`descendants` from each process's threads' ``children`` files in /proc (a few
    small reads, not a read of every process's stat); None where the kernel keeps no such
    file (built without CONFIG_PROC_CHILDREN). Zombies are left out, as by the scan."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop(0)
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # gone
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except FileNotFoundError:
                if os.path.isdir(f"/proc/{parent}/task/{tid}"):
                    return None  # the thread is there, its children file is not
                continue  # the thread ended meanwhile
            except OSError:
                continue
            for kid in kids:
                fields = _stat(kid)
                if fields is not None and fields[0] != "Z":
                    out.append(kid)
                    todo.append(kid)
    return out


def _trees(pids: list[int]) -> list[list[int]]:
    """:func:`descendants` of each of ``pids``; where the kernel lists no children, from one
    scan of /proc for them all."""
    found = [kernel_descendants(pid) for pid in pids]
    if all(t is not None for t in found):
        return found  # type: ignore[return-value]
    tree = children()
    return [descendants(pid, tree) for pid in pids]


def signal_owned(pid: int, sig: int, started: int | None, group: bool = False) -> bool:
    """Signal ``pid`` if it is still ours; ``group``: its whole tree (its process group, when
    it leads one, and every descendant), the parent first (a stopped or dead parent starts no
    new child)."""
    return signal_all([(pid, started)], sig, group)[0]


def signal_all(targets: list[tuple[int, int | None]], sig: int, group: bool = False
               ) -> list[bool]:
    """:func:`signal_owned` of each (pid, start time), whether each was signalled: with
    ``group``, the trees read before the signals and again after (what they forked meanwhile);
    where that takes a scan of /proc, one for them all each time, not one each."""
    mine = [owned(pid, started) for pid, started in targets]
    trees = _trees([pid for (pid, _), ok in zip(targets, mine, strict=True) if ok]
                   if group else [])
    trees = [trees.pop(0) if ok and group else [] for ok in mine]
    sent = []
    for (pid, _), ok in zip(targets, mine, strict=True):
        if ok:
            try:
                if group and os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)
            except ProcessLookupError:
                ok = False
        sent.append(ok)
    if group and sig != signal.SIGKILL and any(sent):  # still there: add what they forked since
        signalled = [pid for (pid, _), ok in zip(targets, sent, strict=True) if ok]
        for kids, now in zip([t for t, ok in zip(trees, sent, strict=True) if ok],
                             _trees(signalled), strict=True):
            kids += [c for c in now if c not in kids]
    for kids, ok in zip(trees, sent, strict=True):
        for child in kids if ok else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, sig)
    return sent


class ProcessTable:
    """The run's processes: spawn them, remember them in ``path`` (the run's ``pids.json``),
    stop them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._started: dict[str, int | None] = {}
        self._adopted: dict[str, int] = {}
        self._mu = threading.Lock()
        self._save()

    def spawn(self, name: str, argv: list[str], log: Path, *, env: dict[str, str] | None = None,
              tie_to_controller: bool = False, group: int | None = None,
              user: str | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own session (Ctrl-C at the terminal is the controller's).
        ``group``: run it with that group id only (iptables can match its packets by it).
        ``user``: run it as that user (a server that refuses root), with the user's group
        unless ``group`` is given."""
        log.parent.mkdir(parents=True, exist_ok=True)
        fh: IO[bytes] = log.open("ab")
        preexec: Callable[[], None] | None = die_with_parent if tie_to_controller else None
        uid = None
        if user is not None:
            entry = pwd.getpwnam(user)
            uid, group = entry.pw_uid, entry.pw_gid if group is None else group
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, preexec_fn=preexec, group=group,
                                extra_groups=None if group is None else [], user=uid)
        fh.close()
        with self._mu:
            self._procs[name] = proc
            self._started[name] = start_time(proc.pid)
            self._save()
        return proc

    def adopt(self, name: str, pid: int) -> None:
        """Track a process someone else started (a server inside a container) by pid."""
        with self._mu:
            self._procs.pop(name, None)
            self._adopted[name] = pid
            self._started[name] = start_time(pid)
            self._save()

    def pid(self, name: str) -> int | None:
        proc = self._procs.get(name)
        if proc is not None:
            return proc.pid if proc.poll() is None else None
        pid = self._adopted.get(name)
        if pid is not None and owned(pid, self._started.get(name)):
            return pid
        return None

    def send(self, name: str, sig: int, *, group: bool = False) -> bool:
        """Signal the process (``group``: its whole process group) if it is still ours."""
        pid = self.pid(name)
        if pid is None:
            return False
        return signal_owned(pid, sig, self._started.get(name), group)

    def send_all(self, names: list[str], sig: int, *, group: bool = False) -> None:
        """:meth:`send` to each of ``names`` still ours, their trees found together
        (:func:`signal_all`)."""
        targets = [(pid, self._started.get(name)) for name in names
                   if (pid := self.pid(name)) is not None]
        signal_all(targets, sig, group)

    def wait_gone(self, name: str, timeout: float) -> bool:
        """Wait until the process is gone (reaped, or no longer ours)."""
        proc = self._procs.get(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return True
            elif self.pid(name) is None:
                return True
            time.sleep(0.02)
        return False

    def kill(self, name: str, timeout: float = 5.0) -> bool:
        """SIGKILL the process's whole tree and wait, up to ``timeout``, until every process of
        it has died (is gone or a zombie), not only the process itself: a PostgreSQL backend
        leads a session of its own and can outlive its killed postmaster for a while, still
        attached to the shared memory a restarted postmaster refuses to share. Whether all
        died in time."""
        pid = self.pid(name)
        if pid is None:
            return True
        tree = [(p, start_time(p)) for p in [pid, *descendants(pid)]]
        self.send(name, signal.SIGKILL, group=True)
        deadline = time.monotonic() + timeout
        while any(owned(p, started) for p, started in tree):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return self.wait_gone(name, max(0.0, deadline - time.monotonic()))

    def stop(self, name: str, timeout: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal, wait up to ``timeout``, then SIGKILL. Returns the exit code if known."""
        if self.pid(name) is not None:
            self.send(name, signal.SIGCONT, group=True)  # a stopped process cannot act on it
            self.send(name, sig)
            if not self.wait_gone(name, timeout):
                self.send(name, signal.SIGKILL, group=True)
                self.wait_gone(name, 5)
        proc = self._procs.get(name)
        return None if proc is None else proc.returncode

    def kill_all(self) -> None:
        for name in [*self._procs, *self._adopted]:
            self.send(name, signal.SIGKILL, group=True)
        deadline = time.monotonic() + 5
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))

    def _save(self) -> None:
        data = {"controller": os.getpid(), "controller_started": start_time(os.getpid()),
                "processes": {n: [p.pid, self._started.get(n)] for n, p in self._procs.items()}}
        data["processes"].update({n: [pid, self._started.get(n)]
                                  for n, pid in self._adopted.items()})
        write_json(self.path, data, indent=1)


def kill_recorded(path: Path) -> list[str]:
    """``harness clean``: SIGKILL every process recorded in ``path`` that is still ours."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    killed = []
    for name, entry in data.get("processes", {}).items():
        if not isinstance(entry, list) or len(entry) != 2 or entry[1] is None:
            continue  # without a start time we cannot be sure it is ours: leave it
        pid, started = int(entry[0]), int(entry[1])
        if signal_owned(pid, signal.SIGKILL, started, group=True):
            killed.append(f"{name} (pid {pid})")
    return killed
