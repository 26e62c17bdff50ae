"""A lock's ``setup()`` (workloads/lock_setup.py): called once in each client process before its
first op, for sync locks as for async ones; a setup that raises or hangs stops the client with
one line and the run with exit 3 (could not run), never a verdict."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness_runs import bounded
from workloads.lock_setup import LockSetupError, set_up

REPO = Path(__file__).resolve().parents[1]
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing")

PLUGIN = '''
import asyncio
import time
import uuid
from pathlib import Path

import redis
import redis.asyncio as aioredis

from harness.core.locks import Grant, LockConfig
from harness.core.options import Option

OPTIONS = {"marks": Option(str, "", "a directory: each client notes its setup and first "
                                    "acquire in a file there")}


class Marks:
    """Notes ``setup`` and the first ``acquire`` (with how many setups came before it)."""

    def __init__(self, config: LockConfig) -> None:
        self.file = Path(config.options["marks"]) / f"c{config.process}.txt"
        self.setups = 0
        self.acquires = 0

    def note(self, what: str) -> None:
        with self.file.open("a") as f:
            f.write(what + "\\n")

    def set_up(self) -> None:
        self.setups += 1
        self.note("setup")

    def first_acquire(self) -> None:
        self.acquires += 1
        if self.acquires == 1:
            self.note(f"acquire after {self.setups} setup")


class SyncSetupLock:
    """SET NX PX; its setup is noted."""

    name = "sync-setup"
    dbs = ("redis",)
    options = OPTIONS

    def __init__(self, config: LockConfig) -> None:
        n = config.nodes[0]
        self.r = redis.Redis(n.host, n.port, socket_timeout=config.op_timeout)
        self.marks = Marks(config)
        self.ttl_ms = int(config.ttl * 1000)

    def setup(self) -> None:
        self.r.ping()
        self.marks.set_up()

    def acquire(self, timeout: float) -> Grant | None:
        self.marks.first_acquire()
        me = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.r.set("setup-lock", me, nx=True, px=self.ttl_ms):
                return Grant(handle=me)
            time.sleep(0.01)
        return None

    def release(self, grant: Grant) -> bool:
        return bool(self.r.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return "
                                "redis.call('del', KEYS[1]) end", 1, "setup-lock",
                                grant.handle))


class AsyncSetupLock:
    """The same lock on asyncio; its ``async def setup`` is noted."""

    name = "async-setup"
    dbs = ("redis",)
    options = OPTIONS

    def __init__(self, config: LockConfig) -> None:
        self.node = config.nodes[0]
        self.marks = Marks(config)
        self.ttl_ms = int(config.ttl * 1000)
        self.r = None

    async def setup(self) -> None:
        self.r = aioredis.Redis(host=self.node.host, port=self.node.port)
        await self.r.ping()
        self.marks.set_up()

    async def acquire(self, timeout: float) -> Grant | None:
        self.marks.first_acquire()
        me = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.r.set("setup-lock", me, nx=True, px=self.ttl_ms):
                return Grant(handle=me)
            await asyncio.sleep(0.01)
        return None

    async def release(self, grant: Grant) -> bool:
        return bool(await self.r.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return "
                                      "redis.call('del', KEYS[1]) end", 1, "setup-lock",
                                      grant.handle))


class FailingSetupLock(SyncSetupLock):
    """Its setup finds the server in a state it cannot work with."""

    name = "failing-setup"

    def setup(self) -> None:
        raise RuntimeError("the lock table is missing")
'''


class Raises:
    def setup(self) -> None:
        raise ValueError("no table")


class Counts:
    def __init__(self) -> None:
        self.calls = 0

    def setup(self) -> None:
        self.calls += 1


def test_a_lock_without_setup_is_left_alone_and_one_with_it_is_called_once() -> None:
    set_up(object())
    lock = Counts()
    set_up(lock, bound=5.0)
    assert lock.calls == 1


def test_a_setup_that_raises_is_one_error_naming_the_setup_and_where_it_failed() -> None:
    with pytest.raises(LockSetupError) as caught:
        set_up(Raises(), bound=5.0)
    assert str(caught.value) == "the lock's setup() failed: ValueError: no table"
    tb = caught.value.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    assert tb is not None and tb.tb_frame.f_code.co_name == "setup"  # the lock's own line
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_setup_past_its_bound_ends_the_process_with_one_line_and_exit_70(
        tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import time
        from workloads.lock_setup import set_up

        class Hangs:
            def setup(self):
                time.sleep(30)

        set_up(Hangs(), bound=0.3)
        print("returned")
    """)
    proc = bounded([sys.executable, "-c", script], timeout=20,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 70, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == ("client stopped: LockSetupError: the lock's setup() did not return "
                           "within 0.3 s\n")


def harness_with_plugin(tmp_path: Path, *args: str) -> tuple[int, str]:
    (tmp_path / "setup_plugins.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = bounded([sys.executable, "-m", "harness.cli", "run", "--store", str(tmp_path / "s"),
                    "--quiet", "--nemesis", "none", "--seed", "1", *args], env=env,
                   timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.servers
@needs_redis
@pytest.mark.parametrize("lock", ["SyncSetupLock", "AsyncSetupLock"])
def test_each_client_sets_its_lock_up_once_before_its_first_acquire(tmp_path: Path,
                                                                    lock: str) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    code, out = harness_with_plugin(tmp_path, "--lock", f"setup_plugins:{lock}", "--lock-opt",
                                    f"marks={marks}", "--clients", "3", "--time-limit", "3",
                                    "--hold", "0.01-0.05")
    assert code == 0, out
    files = sorted(p.name for p in marks.iterdir())
    assert files == ["c0.txt", "c1.txt", "c2.txt"], files
    for f in marks.iterdir():
        assert f.read_text().splitlines() == ["setup", "acquire after 1 setup"], f


@pytest.mark.servers
@needs_redis
def test_a_setup_that_raises_stops_the_run_as_could_not_run_with_its_line(
        tmp_path: Path) -> None:
    code, out = harness_with_plugin(tmp_path, "--lock", "setup_plugins:FailingSetupLock",
                                    "--lock-opt", f"marks={tmp_path}", "--time-limit", "3")
    assert code == 3, out
    assert ("exited early: client stopped: LockSetupError: the lock's setup() failed: "
            "RuntimeError: the lock table is missing (at setup_plugins.py:") in out, out
    assert "Traceback" not in out
    assert not list(tmp_path.glob("c*.txt"))  # no acquire was ever called
