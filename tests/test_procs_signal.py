"""Signals to several process trees at once (harness.controller.procs.signal_all): each tree
whole, its children too, with /proc scanned twice for all of them rather than twice each; and
never a process that is not the one recorded."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.controller import procs
from harness.controller.procs import ProcessTable, signal_all, start_time

TREE = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
       "'import time; time.sleep(60)']); time.sleep(60)"


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_for(check: object, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def trees(tmp_path: Path) -> object:
    """Three processes, each in a session of its own with one child."""
    table = ProcessTable(tmp_path / "pids.json")
    names = [f"t{i}" for i in range(3)]
    for name in names:
        table.spawn(name, [sys.executable, "-c", TREE], tmp_path / f"{name}.log")
    kids: dict[str, int] = {}
    for name in names:
        pid = table.pid(name)
        assert pid is not None
        wait_for(lambda p=pid: procs.descendants(p), f"{name}'s child started")
        kids[name] = procs.descendants(pid)[0]
    yield table, names, kids
    table.kill_all()
    for kid in kids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(kid, signal.SIGKILL)


def test_every_tree_is_stopped_and_continued_whole(trees: object,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    table, names, kids = trees  # type: ignore[misc]
    scans = []
    real = procs.children
    monkeypatch.setattr(procs, "children", lambda: scans.append(1) or real())
    table.send_all(names, signal.SIGSTOP, group=True)
    everyone = [*(table.pid(n) for n in names), *kids.values()]
    wait_for(lambda: all(state(p) == "T" for p in everyone), "every process stopped")
    assert len(scans) == 2  # before the signals and after, for the three trees together
    table.send_all(names, signal.SIGCONT, group=True)
    wait_for(lambda: all(state(p) in "SR" for p in everyone), "every process running again")
    table.send_all(names, signal.SIGTERM)  # not the group: the children stay
    wait_for(lambda: all(table.pid(n) is None for n in names), "the parents gone")
    assert all(state(k) in "SR" for k in kids.values())


def test_a_recycled_pid_is_not_signalled() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = start_time(sleeper.pid)
        assert started is not None
        sent = signal_all([(sleeper.pid, started + 1), (sleeper.pid, started)], signal.SIGSTOP,
                          group=True)
        assert sent == [False, True]
        wait_for(lambda: state(sleeper.pid) == "T", "the recorded process stopped")
    finally:
        sleeper.kill()
        sleeper.wait()
