"""Running the real `harness` CLI from tests: one subprocess per command, verdicts read back
from the results store. Shared by every test file that runs servers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def harness(*args: str, timeout: float = 240, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *args], timeout=timeout, env=env)


def bounded(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)`` that cannot hang the suite.

    The output goes to files, not pipes: a server or client the command started and left
    behind cannot hold a pipe open and keep the test waiting for an end of file that never
    comes (``subprocess.run``'s own timeout waits for it). Past ``timeout`` the command is
    asked to stop (SIGINT: a run heals and saves what it recorded), then its process group is
    killed, and the test fails with the tail of what it printed."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, env=env, cwd=cwd, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGINT, 30.0), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=grace)
                    break
            out.seek(0)
            err.seek(0)
            tail = (out.read() + err.read())[-3000:]
            raise AssertionError(f"{' '.join(argv[:6])} ... still running after {timeout:.0f} s "
                                 f"(stopped); it printed:\n{tail}") from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, code, out.read(), err.read())


def run(store: Path, *args: str) -> tuple[int, dict[str, Any], Path, str]:
    """`harness run` into ``store``: (exit code, results.json, run dir, output)."""
    proc = harness("run", "--store", str(store), "--quiet", *args)
    latest = (store / "latest").resolve()
    path = latest / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    return proc.returncode, results, latest, proc.stdout + proc.stderr


def ran(store: Path, code: int, *args: str) -> tuple[dict[str, Any], Path]:
    """`harness run` into ``store`` that must exit ``code`` (else the test fails with what it
    printed): (results.json, run dir)."""
    got, results, run_dir, out = run(store, *args)
    assert got == code, out
    return results, run_dir


def docker_engine() -> Any:
    """A Docker SDK client with the node image present, or skip the test saying why."""
    import pytest

    try:
        import docker

        c = docker.from_env(timeout=10)
        c.ping()
        c.images.get("lock-harness/node:latest")
        return c
    except Exception as e:  # no SDK, no engine, no image
        pytest.skip(f"docker backend unavailable ({type(e).__name__}): run `bash setup.sh`")


def history(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


def near_faults(ops: list[dict[str, Any]], within: float = 0.5) -> list[str]:
    """One line per op (client or nemesis) within ``within`` s of a nemesis op, in order."""
    marks = [op["time"] for op in ops if op["process"] == "nemesis"]
    ns = within * 1e9
    out = []
    for op in ops:
        if any(abs(op["time"] - t) <= ns for t in marks):
            detail = op.get("detail") or op.get("error") or ""
            out.append(f"  {op['time'] / 1e9:8.3f} s  {op['process']!s:>8} {op['type']:<6} "
                       f"{op['f']} {op.get('value')!r} {detail}".rstrip())
    return out


def run_docker(store: Path, *args: str) -> tuple[int, dict[str, Any], Path, str]:
    """`harness run --backend docker` into ``store``."""
    return run(store, "--backend", "docker", *args)


def own_rules(run_dir: Path) -> list[str]:
    """This run's iptables rules (other runs may be live on this machine)."""
    from harness.controller import netfilter

    marker = f"lock-harness:{run_dir.parent.name}:{run_dir.name}"
    return [r for r in netfilter.rules() if marker in r]


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def assert_jumped(jump: dict[str, Any], step: float = 60.0) -> None:
    """A clock move's history op shows a verified offset of ``step`` or, when the nemesis moved
    again because the hold it aimed at had ended, of a few steps (nemesis/clock.py)."""
    from nemesis.clock import RETARGETS, TOLERANCE

    offset = jump["detail"]["offset"]
    assert offset in [step * k for k in range(1, RETARGETS + 2)], jump
    assert all(abs(v - offset) < TOLERANCE for v in jump["detail"]["observed"].values()), jump


def killed_mid_run(store: Path, *args: str, until: str | tuple[str, ...], journal: str = "nemesis",
                   within: float = 60.0) -> Path:
    """Start `harness run` into ``store``, wait until its ``journal`` (the nemesis's, or a
    client's: ``c0``) has the line fragment ``until`` (each of them: a fault in force), SIGKILL
    the controller and return the run dir."""
    wanted = (until,) if isinstance(until, str) else until
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--store", str(store),
                             "--quiet", "--time-limit", "120", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            path = store / "latest" / "journals" / f"{journal}.jsonl"
            text = path.read_text() if path.exists() else ""
            if all(w in text for w in wanted):
                return (store / "latest").resolve()
            time.sleep(0.2)
        raise AssertionError(f"{' and '.join(wanted)} not in the {journal} journal within "
                             f"{within:g} s (exit {proc.poll()})")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def cleaned(store: Path, run_dir: Path) -> None:
    """`harness clean` of ``store`` ends every process the killed run ``run_dir`` recorded and
    removes its iptables rules."""
    pids = json.loads((run_dir / "pids.json").read_text())["processes"]
    done = harness("clean", "--store", str(store))
    assert done.returncode == 0, done.stderr
    time.sleep(0.5)
    left = [f"{name}:{pid}" for name, (pid, _) in pids.items() if alive(pid)]
    assert not left, f"still running after clean: {left}"
    assert not own_rules(run_dir)
