"""The plugin API as a lock library's author meets it (issue 12): declared options, workload
shape on the command line, exceptions that mean "not acquired", async locks with background
tasks, faults aimed at a waiting client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness_runs import bounded, history, run

REPO = Path(__file__).resolve().parents[1]
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing")

PLUGIN = '''
import asyncio
import time
import uuid

import redis
import redis.asyncio as aioredis

from harness.core.locks import Grant, Indeterminate, LockConfig
from harness.core.options import Option

UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"


class Busy(Exception):
    """What this library raises when the lock stays taken until the timeout."""


class OptLock:
    """A SET NX PX lock whose key prefix and lease are options; it raises Busy on timeout."""

    name = "opt-lock"
    summary = "a lock with two options"
    dbs = ("redis",)
    options = {"prefix": Option(str, "plain", "the key's prefix"),
               "lease": Option(float, 2.0, "seconds the key lives", minimum=0.1)}
    timeout_errors = (Busy,)

    def __init__(self, config: LockConfig) -> None:
        n = config.nodes[0]
        self.r = redis.Redis(n.host, n.port, socket_timeout=config.op_timeout)
        self.key = f"{config.options['prefix']}:{config.name}"
        self.lease_ms = int(config.options["lease"] * 1000)
        self.unlock = self.r.register_script(UNLOCK)

    def acquire(self, timeout: float) -> Grant:
        me = uuid.uuid4().hex
        try:
            ok = self.r.set(self.key, me, nx=True, px=self.lease_ms)
        except redis.RedisError as e:
            raise Indeterminate(str(e)) from e
        if not ok:
            raise Busy(f"{self.key} is taken")
        return Grant(validity=self.lease_ms / 1000, handle=me)

    def release(self, grant: Grant) -> bool:
        return bool(self.unlock(keys=[self.key], args=[grant.handle]))


class NamespacedLock(OptLock):
    """Declares an option called seed and one whose default is None: both reach
    config.options as declared, while the run's seed and source stay in config.harness."""

    options = {**OptLock.options, "seed": Option(int, 7, "this library's own seed"),
               "note": Option(str, None, "optional, no default")}

    def __init__(self, config: LockConfig) -> None:
        if config.options.get("seed") != 7 or config.options.get("note", "absent") is not None:
            raise RuntimeError(f"config.options is {config.options}")
        if config.harness.get("seed") != 11 or not config.harness.get("source"):
            raise RuntimeError(f"config.harness is {config.harness}")
        super().__init__(config)


class OldApiSentinelLock(OptLock):
    """Written against the API before config.harness: the Sentinels, the service and the seed
    read from config.options."""

    dbs = ("redis-sentinel",)

    def __init__(self, config: LockConfig) -> None:
        from redis.sentinel import Sentinel

        sentinels = [(e["host"], int(e["port"])) for e in config.options["sentinels"]]
        self.seed = config.options.get("seed")
        if "source" not in config.options:
            raise RuntimeError("no source")
        self.r = Sentinel(sentinels, socket_timeout=config.op_timeout).master_for(
            config.options.get("service", "mymaster"), socket_timeout=config.op_timeout)
        self.key = f"old:{config.name}"
        self.lease_ms = 2000
        self.unlock = self.r.register_script(UNLOCK)


class SlowReleaseLock(OptLock):
    """Each client's first release hangs 2 s before it unlocks (a library stuck on a dead
    connection); its release_timeout is 0.5 s."""

    workload_defaults = {"release_timeout": 0.5}

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        self.releases = 0

    def release(self, grant: Grant) -> bool:
        self.releases += 1
        if self.releases == 1:
            time.sleep(2)
        return super().release(grant)


class HealFails:
    """A fault that starts (doing nothing) and then cannot be healed."""

    name = "heal-fails"

    def setup(self, ctx) -> None:
        pass

    def select(self, ctx, target=None):
        return ["n1"]

    def duration(self, ctx) -> float:
        return 0.5

    def start(self, ctx, targets) -> None:
        pass

    def stop(self, ctx, targets) -> None:
        raise RuntimeError("cannot heal")

    def teardown(self, ctx) -> None:
        pass

    def detail(self):
        return None


class AsyncRenewingLock:
    """An asyncio lock with a background task that renews the lease every TTL/3 while held
    (as async Redisson-like libraries do)."""

    dbs = ("redis",)

    def __init__(self, config: LockConfig) -> None:
        n = config.nodes[0]
        self.r = aioredis.Redis(host=n.host, port=n.port, socket_timeout=config.op_timeout)
        self.ttl_ms = int(config.ttl * 1000)
        self.renewal: asyncio.Task | None = None

    async def acquire(self, timeout: float) -> Grant | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        me = uuid.uuid4().hex
        while True:
            try:
                ok = await self.r.set("async-lock", me, nx=True, px=self.ttl_ms)
            except redis.RedisError as e:
                raise Indeterminate(str(e)) from e
            if ok:
                self.renewal = asyncio.create_task(self.renew(me))
                return Grant(validity=self.ttl_ms / 1000, handle=me)
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(0.02)

    async def renew(self, me: str) -> None:
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            if await self.r.get("async-lock") != me.encode():
                return
            await self.r.pexpire("async-lock", self.ttl_ms)

    async def release(self, grant: Grant) -> bool:
        if self.renewal is not None:
            self.renewal.cancel()
        return bool(await self.r.eval(UNLOCK, 1, "async-lock", grant.handle))

    async def close(self) -> None:
        await self.r.aclose()
'''


def plugin_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "api_plugins.py").write_text(PLUGIN)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}


def harness_in(tmp_path: Path, *args: str, timeout: float = 240
               ) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *args],
                   env=plugin_env(tmp_path), timeout=timeout)


def test_a_plugins_options_are_listed_and_a_typo_is_one_line(tmp_path: Path) -> None:
    listing = harness_in(tmp_path, "list", "--lock", "api_plugins:OptLock")
    assert listing.returncode == 0, listing.stderr
    assert "prefix" in listing.stdout and "lease" in listing.stdout
    assert "timeout errors (fail): Busy" in listing.stdout
    for bad, says in (("lesae=3", "not an option of lock api_plugins:OptLock"),
                      ("lease=soon", "expected a number"), ("lease=0", "at least 0.1")):
        proc = harness_in(tmp_path, "run", "--lock", "api_plugins:OptLock", "--lock-opt", bad,
                          "--store", str(tmp_path / "s"))
        assert proc.returncode == 64 and says in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1


def test_a_lock_table_in_a_config_gives_name_and_options(tmp_path: Path) -> None:
    cfg = tmp_path / "spec.toml"
    cfg.write_text('nemesis = "none"\n[lock]\nname = "api_plugins:OptLock"\nlesae = 3\n')
    proc = harness_in(tmp_path, "run", "--config", str(cfg), "--store", str(tmp_path / "s"))
    assert proc.returncode == 64 and "--lock-opt 'lesae'" in proc.stderr


@pytest.mark.servers
@needs_redis
def test_options_reach_the_lock_and_test_json(tmp_path: Path) -> None:
    store = tmp_path / "s"
    proc = harness_in(tmp_path, "run", "--lock", "api_plugins:OptLock", "--lock-opt",
                      "prefix=mine", "--lock-opt", "lease=1.5", "--nemesis", "none",
                      "--time-limit", "4", "--hold", "0.01-0.05", "--think", "0",
                      "--store", str(store), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = (store / "latest").resolve()
    spec = json.loads((run_dir / "test.json").read_text())["spec"]
    assert spec["lock_options"] == {"prefix": "mine", "lease": 1.5}
    assert spec["hold"] == "0.01-0.05"
    ops = history(run_dir)
    fails = [op for op in ops if op["f"] == "acquire" and op["type"] == "fail"]
    assert fails and all(op["error"].startswith("timeout: Busy: mine:lock") for op in fails)
    assert not [op for op in ops if op["f"] == "acquire" and op["type"] == "info"]


@pytest.mark.servers
@needs_redis
def test_a_lock_option_named_seed_and_one_without_default_leave_the_harness_its_own(
        tmp_path: Path) -> None:
    """The lock checks config.options and config.harness as it starts: a client whose lock
    raises there exits, and the run is exit 3, so exit 0 says both were as declared."""
    proc = harness_in(tmp_path, "run", "--lock", "api_plugins:NamespacedLock", "--nemesis",
                      "none", "--time-limit", "4", "--seed", "11", "--store",
                      str(tmp_path / "s"), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_config_options_answers_a_moved_key_from_config_harness_and_warns_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.core import locks
    from harness.core.cluster import Node

    monkeypatch.setattr(locks, "_WARNED", set())
    config = locks.LockConfig(nodes=(Node("n1", "127.0.0.1", 1),), options={"seed": 7},
                              harness={"seed": 11, "sentinels": ["s1"], "links": 1})
    assert config.options["seed"] == 7 and config.options == {"seed": 7}  # its own option
    assert capsys.readouterr().err == ""
    assert config.options["sentinels"] == config.options.get("sentinels") == ["s1"]
    assert "sentinels" in config.options and "service" not in config.options
    assert capsys.readouterr().err == (
        "lock-harness: config.options['sentinels'] is deprecated: it moved to "
        "config.harness['sentinels'] (answered from there for this release only: read it "
        "there)\n")  # once
    for key in ("links", "service", "lease"):  # not moved, or not given: as a dict
        assert config.options.get(key, "none") == "none"
        with pytest.raises(KeyError):
            config.options[key]
    assert capsys.readouterr().err == ""


def test_a_lock_reading_a_moved_key_is_told_at_load_where_it_went(tmp_path: Path) -> None:
    """Before any server starts (`harness list` starts none): one line a key, naming the
    place, the file and line of the read; the class loads (this release answers them)."""
    proc = harness_in(tmp_path, "list", "--lock", "api_plugins:OldApiSentinelLock")
    assert proc.returncode == 0, proc.stderr
    lines = list(enumerate(PLUGIN.splitlines(), start=1))  # (line 1 is PLUGIN's first)
    lines = lines[next(n for n, text in lines if "class OldApiSentinelLock" in text):]
    read = {key: next(n for n, text in lines if f'options["{key}"]' in text or
                      f'options.get("{key}"' in text or f'"{key}" not in config.options' in text)
            for key in ("sentinels", "seed", "source", "service")}
    assert proc.stderr.splitlines() == [
        f"harness: lock 'api_plugins:OldApiSentinelLock': api_plugins.py:{read[key]}: "
        f"config.options[{key!r}] is deprecated: it moved to config.harness[{key!r}] "
        "(answered from there for this release only: read it there)" for key in read]
    quiet = harness_in(tmp_path, "list", "--lock", "api_plugins:NamespacedLock")
    assert quiet.returncode == 0 and quiet.stderr == ""  # its seed is an option of its own


@pytest.mark.servers
@needs_redis
def test_a_lock_reading_the_sentinels_from_the_old_place_still_runs(tmp_path: Path) -> None:
    """Last month's API: config.options['sentinels'] gives the Sentinels, with a warning at
    load and one in each client's log, never a KeyError in the clients."""
    store = tmp_path / "s"
    proc = harness_in(tmp_path, "run", "--db", "redis-sentinel", "--lock",
                      "api_plugins:OldApiSentinelLock", "--nemesis", "none", "--time-limit",
                      "4", "--seed", "5", "--store", str(store), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("is deprecated: it moved to config.harness") == 4, proc.stderr
    run_dir = (store / "latest").resolve()
    logs = sorted((run_dir / "logs").glob("client-*.log"))
    assert logs and all("config.options['sentinels'] is deprecated" in log.read_text()
                        for log in logs)
    assert [op for op in history(run_dir) if op["f"] == "acquire" and op["type"] == "ok"]


@pytest.mark.servers
@needs_redis
def test_a_release_past_its_time_limit_is_info_and_the_client_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "s"
    proc = harness_in(tmp_path, "run", "--lock", "api_plugins:SlowReleaseLock", "--nemesis",
                      "none", "--time-limit", "8", "--seed", "1", "--store", str(store),
                      "--quiet")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out  # the lock stays safe: the stalled unlock frees no one
    ops = history((store / "latest").resolve())
    late = [op for op in ops if op["f"] == "release" and op["type"] == "info"]
    assert late and all(op["error"].startswith("release_timeout: no answer within 0.5 s")
                        for op in late), late
    hung = 0
    for op in late:  # the client went on: it asked for the lock while its release hung
        invoked = max(o["time"] for o in ops if o["process"] == op["process"]
                      and o["f"] == "release" and o["type"] == "invoke" and o["time"] <= op["time"])
        assert op["time"] - invoked < 1.5e9, op
        if invoked + 2e9 > 7.5e9:  # the load ended (8 s) before its release would have
            continue
        hung += 1
        again = [o for o in ops if o["process"] == op["process"] and o["f"] == "acquire"
                 and o["type"] == "invoke" and invoked < o["time"] < invoked + 2e9]
        assert again, (op, "no acquire while the release hung")
    assert hung, late


@pytest.mark.servers
@needs_redis
def test_a_fault_that_cannot_be_healed_stops_the_run_with_exit_3(tmp_path: Path) -> None:
    proc = harness_in(tmp_path, "run", "--lock", "redis-setnx", "--nemesis",
                      "api_plugins:HealFails", "--time-limit", "8", "--seed", "1", "--store",
                      str(tmp_path / "s"), "--quiet")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("harness: the nemesis thread stopped: heal-fails could not be "
                           "healed (step 1): RuntimeError: cannot heal"), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.servers
@needs_redis
def test_an_async_lock_with_a_renewal_task_runs_and_a_pause_breaks_it(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ("run", "--lock", "api_plugins:AsyncRenewingLock", "--store", str(store),
              "--quiet", "--seed", "1", "--hold", "0.5-3")
    calm = harness_in(tmp_path, *common, "--nemesis", "none", "--time-limit", "8")
    assert calm.returncode == 0, calm.stdout + calm.stderr  # renewals kept long holds safe
    paused = harness_in(tmp_path, *common, "--nemesis", "pause", "--time-limit", "12")
    assert paused.returncode == 1, paused.stdout + paused.stderr
    assert "lock-overlap" in paused.stdout


@pytest.mark.servers
@pytest.mark.skipif(shutil.which("java") is None, reason="ZooKeeper needs a JVM")
def test_a_partition_aimed_at_a_waiter_cuts_a_client_blocked_in_acquire(store: Path) -> None:
    code, _, run_dir, out = run(store, "--db", "zookeeper", "--nemesis", "partition:waiter",
                                "--time-limit", "15", "--seed", "4")
    # A cut waiter cannot break ZooKeeper's lock recipe (its node goes with its session; a
    # waiter proceeds only as the lowest node), and each cut bites: it completes no lock op.
    assert code == 0, out
    ops = history(run_dir)
    # The nemesis's invoke is journaled as soon as the waiter is picked; the cut lands a few
    # ms later, by when the pick may have been granted (seen in CI): judge the pick.
    starts = [op for op in ops if op["process"] == "nemesis" and op["f"] == "partition"
              and op["type"] == "invoke" and op["value"] == "start"]
    assert starts and all(op["target"] == "waiter" for op in starts)
    for start in starts:
        p = int(start["targets"][0].removeprefix("c"))
        mine = [op for op in ops if op["process"] == p and op["time"] < start["time"]]
        last = mine[-1]  # what that client was doing when it was picked
        assert last["f"] == "acquire" and last["type"] == "invoke", (start, last)


def by_f(ops: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    return [op for op in ops if op["f"] == f]
