"""The pytest plugin, as a lock library would use it: a test file of its own in a directory of
its own, run by pytest in a child process, the plugin found through its ``pytest11`` entry
point. The real test: a 16-line file defines a naive lock and tests it with and without
holder pauses against a real Redis; the pause test fails with the overlap explained."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness.presentation.pytest_plugin import (
    HarnessResult,
    entry_options,
    failing_first,
    import_root,
)

NAIVE = '''import pytest
import redis
from harness.core.locks import Grant

class NaiveLock:  # SET NX PX, released by a bare DEL: a lease, and no check whose it is
    def __init__(self, config):
        self.r, self.ttl = redis.Redis(config.nodes[0].host, config.nodes[0].port), config.ttl
    def acquire(self, timeout):
        ok = self.r.set("lk", 1, nx=True, px=int(self.ttl * 1000))
        return Grant(validity=self.ttl) if ok else None
    def release(self, grant):
        return bool(self.r.delete("lk"))

@pytest.mark.parametrize("nemesis", ["none", "pause"])
def test_naive_lock(lock_harness, nemesis):
    lock_harness.run(NaiveLock, nemesis=nemesis, time_limit=8, seed=1).assert_valid()
'''


def installed() -> bool:
    return any(e.name == "lock_harness" for e in md.entry_points(group="pytest11"))


def pytest_in(directory: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """pytest on a directory of its own (its own rootdir; the plugin from the entry point, or
    named with -p in an environment installed before the entry point was added)."""
    plugin = [] if installed() else ["-p", "harness.presentation.pytest_plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs",
                           *plugin, *args], cwd=directory, capture_output=True, text=True,
                          timeout=timeout, env=env)


def replayed(out: str, cwd: Path, *drop: str) -> subprocess.CompletedProcess[str]:
    """The replay line of a failure in pytest's ``out``, pasted into a shell in ``cwd`` whose
    environment lacks ``PYTHONPATH`` and ``drop``: all it needs must be on the line."""
    lines = re.findall(r"^E\s+replay: (.+)$", out, re.M)
    assert lines, out
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", *drop}}
    return subprocess.run(["bash", "-c", lines[-1]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def no_servers_env(tmp_path: Path) -> dict[str, str]:
    """A PATH with python and nothing else: no redis-server, no zookeeper, no etcd."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    return {**os.environ, "PATH": str(bare)}


# pure ---------------------------------------------------------------------------------------
def test_the_plugin_is_found_by_pytest_through_its_entry_point() -> None:
    """(An environment installed before the plugin existed needs `pip install -e .` again.)"""
    [ep] = [e for e in md.entry_points(group="pytest11") if e.name == "lock_harness"]
    assert ep.value == "harness.presentation.pytest_plugin"


def test_import_root_follows_the_module_name(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    top = types.ModuleType("test_top")
    top.__file__ = str(tmp_path / "test_top.py")
    inner = types.ModuleType("pkg.test_inner")
    inner.__file__ = str(tmp_path / "pkg" / "test_inner.py")
    package = types.ModuleType("pkg")
    package.__file__ = str(tmp_path / "pkg" / "__init__.py")
    for m in (top, inner, package):
        Path(m.__file__).touch()  # type: ignore[arg-type]
    assert import_root(top) == tmp_path.resolve()
    assert import_root(inner) == tmp_path.resolve()
    assert import_root(package) == tmp_path.resolve()
    odd = types.ModuleType("renamed")  # a file whose name is not its module's
    odd.__file__ = str(tmp_path / "test_top.py")
    assert import_root(odd) is None


def test_keywords_become_harness_run_options() -> None:
    e = entry_options("m:L", {"nemesis": ["pause", "kill"], "time_limit": 5, "clients": 3,
                              "nemesis_options": {"kill-delay": 2}, "seed": None}, 7)
    assert e == {"lock": "m:L", "nemesis": "pause,kill", "time-limit": 5, "clients": 3,
                 "nemesis-opt": {"kill-delay": 2}, "seed": 7}
    assert entry_options("m:L", {"nemesis": [], "seed": 1}, 7) == {
        "lock": "m:L", "nemesis": "none", "seed": 1}


def test_the_explanation_leads_with_what_failed(tmp_path: Path) -> None:
    checks = {"availability": {"valid": True}, "linearizable": {"valid": False, "witness": {
        "explanation": "no order explains it"}}, "mutex": {"valid": False, "lock-overlaps": [
            {"explanation": "process 2 acquired at 4.81 s while process 3 had not released"}]},
        "stats": {"valid": True}}
    assert list(failing_first(checks)) == ["mutex", "linearizable", "availability", "stats"]
    r = HarnessResult(test="t", spec={"lock": "m:L", "db": "redis", "workload": "mutex",
                                      "nemesis": ["pause"], "clients": 5, "time_limit": 8,
                                      "seed": 1},
                      command="harness run --lock m:L", exit_code=1, run_dir=tmp_path,
                      results={"valid": False, "checks": checks})
    assert r.valid is False and r.verdict == "INVALID"
    assert [(v["checker"], v["kind"]) for v in r.violations] == [
        ("linearizable", "witness"), ("mutex", "lock-overlaps")]
    with pytest.raises(AssertionError) as info:
        r.assert_valid()
    text = str(info.value)
    assert text.startswith("lock m:L on redis (mutex workload) under pause: 5 clients, 8 s")
    assert text.index("process 2 acquired") < text.index("no order explains it")
    assert text.rstrip().endswith("replay: harness run --lock m:L")
    r.assert_invalid()


# skipping and usage errors, without servers ---------------------------------------------------
def test_missing_servers_skip_cleanly_or_fail_on_demand(tmp_path: Path) -> None:
    (tmp_path / "test_naive.py").write_text(NAIVE)
    env = no_servers_env(tmp_path)
    proc = pytest_in(tmp_path, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "2 skipped" in out, out
    assert "SKIPPED [2] test_naive.py:14: lock-harness: redis-server not found" in out
    proc = pytest_in(tmp_path, "--harness-require-servers", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "2 errors" in out, out
    assert "(--harness-require-servers)" in out
    proc = pytest_in(tmp_path, "-m", "not lock_harness", env=env)
    assert "2 deselected" in proc.stdout, proc.stdout


def test_a_lock_the_clients_cannot_import_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text('''
import pytest

def test_local_class(lock_harness):
    class Inner:
        def acquire(self, timeout): ...
        def release(self, grant): ...
    lock_harness.run(Inner)

def test_not_a_lock(lock_harness):
    class NoRelease: ...
    lock_harness.run("test_bad:NoRelease")

def test_unknown_option(lock_harness):
    lock_harness.run("redis-setnx", nemesiss="pause")

def test_env_not_strings(lock_harness):
    lock_harness.run("redis-setnx", env={"RETRIES": 3})

@pytest.mark.lock_harness("mongo")
def test_unknown_db(lock_harness):
    pass
''')
    proc = pytest_in(tmp_path, "-q")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "4 failed" in out and "1 error" in out, out
    assert "Inner must be defined at the top level of an importable module" in out
    assert "test_bad has no 'NoRelease'" in out
    assert "unknown option 'nemesiss'" in out
    assert "env must map variable names to strings (PYTHONPATH is the plugin's own), got " \
        "'RETRIES'" in out
    assert "@pytest.mark.lock_harness: unknown db 'mongo'" in out
    assert "Traceback" not in out


# the acceptance test: a real Redis -----------------------------------------------------------
@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_a_lock_defined_in_a_test_file_fails_with_the_overlap_explained(tmp_path: Path) -> None:
    """Two real runs of 8 s: the naive lock passes without faults (the client processes did
    import the class from the test file) and fails under holder pauses, in words; its replay
    line, run from a shell elsewhere, finds it invalid again (a third run)."""
    project = tmp_path / "mylib"
    project.mkdir()
    (project / "test_naive.py").write_text(NAIVE)
    assert len(NAIVE.splitlines()) <= 16
    store = tmp_path / "runs"
    proc = pytest_in(project, "--harness-store", str(store))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "FAILED test_naive.py::test_naive_lock[pause]" in out
    assert "lock test_naive:NaiveLock on redis (mutex workload) under pause" in out
    assert re.search(r"first of lock-overlaps: process \d+ acquired at [\d.]+ s while process "
                     r"\d+, which acquired at [\d.]+ s, had not released", out), out
    assert re.search(rf"replay: PYTHONPATH={project}\S* {re.escape(sys.executable)} -m "
                     r"harness.cli run --lock test_naive:NaiveLock --nemesis pause", out), out
    again = replayed(out, tmp_path / "elsewhere")
    assert again.returncode == 1, again.stdout + again.stderr
    assert re.search(r"^INVALID", again.stdout, re.M), again.stdout
    # the terminal summary names both runs; their reports are in the store asked for
    reports = re.findall(r"^(VALID|INVALID)\s+test_naive.py::\S+\s+(\S+report.html)$", out,
                         re.M)
    assert [v for v, _ in reports] == ["VALID", "INVALID"], out
    assert all(Path(p).is_file() and Path(p).is_relative_to(store) for _, p in reports)


@pytest.mark.servers
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server missing: run `bash setup.sh`")
def test_a_lock_that_raises_in_its_clients_is_a_harness_error_in_one_line(
        tmp_path: Path) -> None:
    """Not a verdict: the test fails saying the harness could not run it, and why (the
    lock's own exception, from the client's log)."""
    (tmp_path / "test_broken.py").write_text('''
class Broken:
    def __init__(self, config):
        raise RuntimeError("cannot connect to the lock service")
    def acquire(self, timeout): ...
    def release(self, grant): ...

def test_broken(lock_harness):
    lock_harness.run(Broken, nemesis="none", time_limit=3).assert_valid()
''')
    proc = pytest_in(tmp_path, "--harness-store", str(tmp_path / "runs"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "1 failed" in out, out
    assert re.search(r"lock-harness could not run the test \(exit 3\): client \d+ exited early: "
                     r"client stopped: RuntimeError: cannot connect to the lock service .*"
                     r"\(log: \S+client-\d+\.log\); log: \S+harness\.log", out), out
    assert "Traceback" not in out
