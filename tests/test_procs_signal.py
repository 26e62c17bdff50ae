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


def wait_for(check: object, what: str, timeout: float = 10.0, pids: tuple[int, ...] = ()
             ) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, (what, {p: state(p) for p in pids})
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
        kids[name] = kid = procs.descendants(pid)[0]
        # (not stopped between its fork and its exec: its parent would wait for it in D)
        wait_for(lambda k=kid, p=pid: b"sleep(60)" in Path(f"/proc/{k}/cmdline").read_bytes()
                 and state(p) == "S", f"{name}'s child running", pids=(pid, kid))
    yield table, names, kids
    table.kill_all()
    for kid in kids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(kid, signal.SIGKILL)


@pytest.mark.parametrize("kernel", [True, False], ids=["children-files", "scan"])
def test_every_tree_is_stopped_and_continued_whole(trees: object, kernel: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """As the kernel lists children, or (a kernel without those files) from scans of /proc:
    two for the three trees together, before the signals and after."""
    table, names, kids = trees  # type: ignore[misc]
    assert procs.kernel_descendants(os.getpid()) is not None  # this machine's kernel has them
    if not kernel:
        monkeypatch.setattr(procs, "kernel_descendants", lambda pid: None)
    scans = []
    real = procs.children
    monkeypatch.setattr(procs, "children", lambda: scans.append(1) or real())
    table.send_all(names, signal.SIGSTOP, group=True)
    everyone = [*(table.pid(n) for n in names), *kids.values()]
    wait_for(lambda: all(state(p) == "T" for p in everyone), "every process stopped",
             pids=tuple(everyone))
    assert len(scans) == (0 if kernel else 2)
    table.send_all(names, signal.SIGCONT, group=True)
    wait_for(lambda: all(state(p) in "SR" for p in everyone), "every process running again",
             pids=tuple(everyone))
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


def test_the_kernels_children_are_the_scans(trees: object) -> None:
    table, names, kids = trees  # type: ignore[misc]
    scan = procs.children()
    for name in names:
        pid = table.pid(name)
        assert procs.kernel_descendants(pid) == procs.descendants(pid, scan) == [kids[name]]


# A child in a session of its own (as a PostgreSQL backend is) that holds 1 GiB it touched: its
# death after SIGKILL takes the kernel a while (freeing the pages), well after its parent's.
SLOW_TO_DIE = ("import os, sys, time; os.setsid(); b = b'x' * (1 << 30); "
               "open(sys.argv[1], 'w').close(); time.sleep(60)")


def test_a_kill_waits_for_the_whole_tree_to_die(tmp_path: Path) -> None:
    """``ProcessTable.kill`` returns once every process of the tree has died, not only the one
    it spawned: a restart right after must not meet a survivor (PostgreSQL refuses to start
    while a killed postmaster's backend still holds its shared memory)."""
    ready = tmp_path / "ready"
    tree = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            f"{SLOW_TO_DIE!r}, {str(ready)!r}]); time.sleep(60)")
    table = ProcessTable(tmp_path / "pids.json")
    table.spawn("pm", [sys.executable, "-c", tree], tmp_path / "pm.log")
    try:
        wait_for(ready.exists, "the child touched its memory", timeout=30)
        pid = table.pid("pm")
        assert pid is not None
        kid = procs.descendants(pid)[0]
        kid_started = start_time(kid)
        assert table.kill("pm", 10) is True
        assert not procs.owned(kid, kid_started), state(kid)
        assert table.pid("pm") is None
    finally:
        table.kill_all()


def test_a_kill_of_a_process_already_gone_is_done(tmp_path: Path) -> None:
    table = ProcessTable(tmp_path / "pids.json")
    table.spawn("quick", [sys.executable, "-c", "pass"], tmp_path / "q.log")
    assert table.wait_gone("quick", 10)
    assert table.kill("quick", 1) is True
