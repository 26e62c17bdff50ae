"""A third party extends the harness without touching it: a package of its own, installed with
pip, declares a lock and a nemesis as entry points; ``harness list`` shows them with the
package's name and version, ``harness run`` uses them, and test.json records that version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness_runs import harness, run

DIST = "lockharness-demo-plugin"
VERSION = "1.2.3"

PYPROJECT = f"""
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "{VERSION}"
requires-python = ">=3.11"

[project.entry-points."lock_harness.locks"]
demo-setnx = "lockharness_demo:DemoLock"

[project.entry-points."lock_harness.nemeses"]
demo-pause = "lockharness_demo:DemoPause"

[tool.setuptools]
py-modules = ["lockharness_demo"]
"""

MODULE = '''
"""A lock and a fault of a third party's own."""
import uuid

import redis

from harness.core.locks import Grant, Indeterminate, LockConfig
from nemesis.process_faults import PauseHolder

UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"


class DemoLock:
    name = "demo-setnx"
    summary = "the demo plugin's SET NX PX lock"
    dbs = ("redis",)
    tokens = False

    def __init__(self, config: LockConfig) -> None:
        node = config.nodes[0]
        self.r = redis.Redis(node.host, node.port, socket_timeout=config.op_timeout)
        self.key, self.ttl = f"demo:{config.name}", config.ttl
        self.unlock = self.r.register_script(UNLOCK)

    def acquire(self, timeout: float) -> Grant | None:
        me = uuid.uuid4().hex
        try:
            ok = self.r.set(self.key, me, nx=True, px=int(self.ttl * 1000))
        except redis.RedisError as e:
            raise Indeterminate(str(e)) from e
        return Grant(token=None, validity=self.ttl, handle=me) if ok else None

    def release(self, grant: Grant) -> bool:
        return bool(self.unlock(keys=[self.key], args=[grant.handle]))


class DemoPause(PauseHolder):
    name = "demo-pause"
    summary = "the demo plugin's pause: freeze the holder past its TTL"
'''

pytestmark = pytest.mark.servers


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[Path]:
    pkg = tmp_path / "demo-plugin"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "lockharness_demo.py").write_text(MODULE)
    proc = pip("install", "--no-build-isolation", "--no-deps", "-q", str(pkg))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        yield pkg
    finally:
        pip("uninstall", "-y", "-q", DIST)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server missing")
def test_an_installed_plugin_is_listed_run_and_recorded(installed_plugin: Path,
                                                        store: Path) -> None:
    listing = harness("list").stdout
    for name in ("demo-setnx", "demo-pause"):
        line = next(x for x in listing.splitlines() if x.strip().startswith(name))
        assert f"from {DIST} {VERSION}" in line, line
    code, results, run_dir, out = run(store, "--lock", "demo-setnx", "--nemesis", "demo-pause",
                                      "--time-limit", "8", "--seed", "2")
    # a SET NX PX lock whose holder is frozen past its TTL: another client is let in while the
    # holder still believes it holds (Kleppmann's pause), so the run is INVALID
    assert code == 1, out
    assert results["checks"]["mutex"]["valid"] is False
    assert results["checks"]["stats"]["counts"]["acquire"]["ok"] > 0
    test = json.loads((run_dir / "test.json").read_text())
    plugins = {(p["kind"], p["name"]): p for p in test["plugins"]}
    for kind, name in (("lock", "demo-setnx"), ("nemesis", "demo-pause")):
        assert plugins[(kind, name)]["distribution"] == DIST
        assert plugins[(kind, name)]["version"] == VERSION
    assert plugins[("db", "redis")]["distribution"] == "lock-harness"
    history = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(op["process"] == "nemesis" and op["f"] == "demo-pause" for op in history)
