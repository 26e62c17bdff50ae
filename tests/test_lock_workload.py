"""The ``lock`` workload (acquire, hold, release: the lock's own requests and nothing else) and
the lean Redis client of the project's own recipes, on a real redis-server: a correct lock is
valid, a broken one is caught by the lock's intervals alone, a resource mode it cannot use is
refused in one line; the client's outcomes are the history's (refused: nothing done; no reply
in time: unknown)."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import hiredis
import pytest

from dbs.redis import RedisDB
from harness.core.cluster import Node
from harness.core.journal import JournalWriter, read_journal
from harness.core.locks import Grant, Indeterminate, LockConfig, LockContractError
from tests.harness_runs import harness, history, run
from tests.one_node import one_node
from workloads.lock_only import LockWorkload
from workloads.locks.redis_conn import COMPARE_AND_DELETE
from workloads.locks.redis_single import (
    OWNERS,
    DelLock,
    FencedLock,
    GetDelLock,
    SetNxExpireLock,
    SetNxLock,
)
from workloads.mutex import MutexParams
from workloads.resp import BUFFER, FIRST_READ, HOLE, SHORT_REPLIES, Command, LeanRedis, RespError

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing: run `bash setup.sh`")


def clients_ops(ops: list[dict], clients: int) -> list[dict]:
    """The clients' own ops (the controller's final read of the resource comes after them,
    as process ``clients``)."""
    return [op for op in ops if op.get("process") in range(clients)]


@pytest.mark.servers
@needs_redis
def test_a_correct_lock_is_valid_and_nothing_is_written(store: Path) -> None:
    code, results, run_dir, out = run(store, "--workload", "lock", "--time-limit", "3",
                                      "--nemesis", "none", "--hold", "0", "--think", "0",
                                      "--clients", "3", "--keys", "2")
    assert code == 0, out
    ops = history(run_dir)
    mine = clients_ops(ops, 3)
    assert {op["f"] for op in mine} == {"acquire", "release"}  # the lock's requests only
    # every client got the lock, and each of its grants was followed by its release (the rate,
    # with no hold or think time, is bench/bench_test_timings.py lock's)
    for p in range(3):
        oks = [op["f"] for op in mine if op["process"] == p and op["type"] == "ok"]
        assert oks and oks[0] == "acquire", oks[:4]
        assert all(a != b for a, b in itertools.pairwise(oks)), oks
    final_log = next(op for op in ops if op["process"] == 3 and op["type"] == "ok")
    assert final_log["value"] == []  # the resource was never written
    assert results["checks"]["mutex"]["lock-overlap-count"] == 0
    assert results["checks"]["linearizable"]["valid"] is True


@pytest.mark.servers
@needs_redis
def test_a_bare_del_release_is_caught_without_any_resource(store: Path, tmp_path: Path) -> None:
    # redis-del deletes whoever's lock is there: with holds longer than the TTL, a client whose
    # lease expired deletes the next holder's key, and a third client is let in beside it.
    code, results, _, out = run(store, "--workload", "lock", "--lock", "redis-del",
                                "--nemesis", "none", "--ttl", "0.2", "--hold", "0.1-0.4",
                                "--time-limit", "5", "--seed", "1")
    assert code == 1, out
    assert results["checks"]["mutex"]["lock-overlap-count"] >= 1
    assert results["checks"]["linearizable"]["valid"] is False


def test_a_resource_mode_it_cannot_use_is_refused_in_one_line(store: Path) -> None:
    """Refused before anything starts: no server is needed (none is on this PATH)."""
    proc = harness("run", "--store", str(store), "--quiet", "--workload", "lock", "--lock",
                   "redis-fenced", "--resource-mode", "fenced", "--time-limit", "1",
                   timeout=60, env={**os.environ, "PATH": "/nonexistent"})
    code, out = proc.returncode, proc.stdout + proc.stderr
    assert code == 64, out
    lines = [x for x in out.strip().splitlines() if x]
    assert len(lines) == 1 and "--workload lock" in lines[0] and "fenced" in lines[0], out


@pytest.mark.servers
@needs_redis
def test_the_lean_client_speaks_redis(tmp_path: Path) -> None:
    with one_node(RedisDB(), tmp_path) as (node,):
        r = LeanRedis(node.host, node.port, 1.0)
        assert r.set("k", "a", nx=True, px=5000) is True
        assert r.set("k", "b", nx=True, px=5000) is False  # NX: taken
        assert r.get("k") == "a"
        cad = r.register_script("if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                "return redis.call('DEL', KEYS[1]) end return 0")
        assert cad(keys=["k"], args=["b"]) == 0
        assert cad(keys=["k"], args=["a"]) == 1
        assert r.get("k") is None
        assert r.setnx("k2", "x") is True and r.setnx("k2", "y") is False
        assert r.expire("k2", 5) is True and r.delete("k2") == 1
        # Replies past the first read's bytes, read on until whole; an error reply raises
        big = "é" * (3 * FIRST_READ) + "x" * BUFFER
        assert r.resp.call("SET", "big", big) == b"OK" and r.get("big") == big
        assert r.resp.call("STRLEN", "big") == len(big.encode())
        with pytest.raises(RespError, match=r"^ERR unknown command 'NOSUCH'"):
            r.resp.call("NOSUCH")
        assert r.set("k3", "z", nx=True) is True  # the connection is still good
        r.close()


def test_a_short_reply_is_what_hiredis_parses_of_it() -> None:
    for data, known in SHORT_REPLIES.items():
        reader = hiredis.Reader()
        reader.feed(data)
        parsed = reader.gets()
        assert parsed == known and type(parsed) is type(known), data


def test_a_recipe_s_owners_are_distinct_32_hex_digits_drawn_in_batches() -> None:
    lock = SetNxLock(LockConfig(nodes=(Node("n1", "127.0.0.1", 1),)))
    owners = [lock.owners.pop() if lock.owners else lock.draw_owners()
              for _ in range(3 * OWNERS + 7)]
    assert len(set(owners)) == len(owners)
    assert all(len(o) == 32 and int(o, 16) >= 0 and o == o.lower() for o in owners)
    # 128 random bits each: every hex digit turns up at every place
    assert all(len({o[i] for o in owners}) == 16 for i in range(32))


def test_the_lean_client_refused_is_certain_and_silence_is_unknown() -> None:
    with socket.socket() as probe:  # a port nobody listens on: refused, nothing was done
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        LeanRedis("127.0.0.1", free, 0.5).set("k", "v", nx=True)
    # A server that accepts and never answers: the request may have been applied.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    client = LeanRedis("127.0.0.1", server.getsockname()[1], 0.3)
    started = time.monotonic()
    with pytest.raises(Indeterminate, match=r"no reply within 0\.3 s"):
        client.set("k", "v", nx=True)
    assert 0.25 < time.monotonic() - started < 2.0
    for s in (server, *held):
        s.close()


@pytest.mark.parametrize("args", [
    ("SET", "lock:a", HOLE, "NX", "PX", 2000),
    (HOLE,),
    ("EVALSHA", "0" * 40, 2, "k1", "k2", HOLE),
    (HOLE, "tail", 7),
])
@pytest.mark.parametrize("value", ["0123456789abcdef0123456789abcdef", "", "naïve ✓"])
def test_a_prepared_command_is_what_hiredis_packs(args: tuple, value: str) -> None:
    at = args.index(HOLE)
    assert Command(*args).pack(value) == hiredis.pack_command(
        (*args[:at], value, *args[at + 1:]))


@pytest.mark.servers
@needs_redis
def test_the_prepared_requests_answer_as_the_generic_ones(tmp_path: Path) -> None:
    with one_node(RedisDB(), tmp_path) as (node,):
        r = LeanRedis(node.host, node.port, 1.0)
        take = r.setter("k", nx=True, px=5000)
        assert take("a") == b"OK"
        assert take("b") is None  # NX: taken
        assert r.get("k") == "a" and 4000 < int(r.resp.call("PTTL", "k")) <= 5000
        cad = r.script_of_keys(COMPARE_AND_DELETE, ["k"])
        assert cad("b") == 0 and r.get("k") == "a"
        r.resp.call("SCRIPT", "FLUSH")  # the server forgot it: EVAL, then EVALSHA again
        assert cad("a") == 1 and r.get("k") is None
        assert r.resp.call("SCRIPT", "EXISTS", r.resp.script(COMPARE_AND_DELETE)) == [1]
        broken = r.script_of_keys("return redis.call('NOSUCHCOMMAND')", ["k"])
        with pytest.raises(RespError, match=r"^ERR Unknown Redis command called from script"):
            broken("a")
        assert take("c") == b"OK"  # the connection is still good after an error reply
        r.close()


def test_each_redis_recipe_acquires_by_its_own_attempt(tmp_path: Path) -> None:
    """Each recipe's acquire takes the lock by its own attempt (SET NX PX; SETNX then EXPIRE;
    SET NX PX with INCR), in the one loop they share, and releases it."""
    with one_node(RedisDB(), tmp_path) as (node,):
        config = LockConfig(nodes=(node,), name="r", ttl=5.0, op_timeout=1.0)
        probe = LeanRedis(node.host, node.port, 1.0)
        for cls in (SetNxLock, DelLock, GetDelLock, SetNxExpireLock, FencedLock):
            lock = cls(config)
            grant = lock.acquire(0.2)
            assert grant is not None and type(grant) is Grant
            assert probe.get("lock:r") == grant.handle and len(grant.handle) == 32
            assert grant.validity == 5.0
            assert grant.token == (1 if cls is FencedLock else None)
            ttl = int(probe.resp.call("PTTL", "lock:r"))
            assert 4000 < ttl <= 5000  # EXPIRE 5 or PX 5000
            assert lock.acquire(0.05) is None  # held: refused until the timeout
            assert lock.release(grant) is True and probe.get("lock:r") is None
            lock.close()
        probe.close()


def test_a_connection_closed_mid_request_is_unknown_and_the_next_one_reconnects() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        first, _ = server.accept()
        first.recv(1024)
        first.close()  # read the request, then hung up: it may have been applied
        second, _ = server.accept()
        second.recv(1024)
        second.sendall(b"+OK\r\n")
        second.close()

    threading.Thread(target=serve, daemon=True).start()
    take = LeanRedis("127.0.0.1", server.getsockname()[1], 2.0).setter("k", nx=True)
    with pytest.raises(Indeterminate,
                       match=r"^ConnectionResetError: the server closed the connection$"):
        take("v")
    assert take("v") == b"OK"
    server.close()


# where a release runs: on the workload's thread when the lock bounds it, else on its own ------
class _Recorded:
    """A lock whose release says which thread ran it, and may raise."""

    timeout_errors = (TimeoutError,)

    def __init__(self, bound: float | None, error: Exception | None = None) -> None:
        self.bound = bound
        self.error = error
        self.threads: list[threading.Thread] = []

    def acquire(self, timeout: float) -> Grant:
        return Grant(handle="mine")

    def release(self, grant: Grant) -> bool:
        self.threads.append(threading.current_thread())
        if self.error is not None:
            raise self.error
        return True

    def release_bound(self) -> float | None:
        return self.bound


def one_session(lock: _Recorded, tmp_path: Path) -> list[dict]:
    tmp_path.mkdir(exist_ok=True)
    journal = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    stop = threading.Event()
    workload = LockWorkload(MutexParams(process=0, hold_min=0, hold_max=0, think_min=0,
                                        think_max=0, release_timeout=2.0), lock, None,
                            journal, stop)
    workload.critical_section = lambda grant: stop.set()  # type: ignore[method-assign]
    workload.run()
    journal.close()
    return [op for op in read_journal(journal.path) if op["f"] == "release"]


@pytest.mark.parametrize(("bound", "inline"), [(1.5, True), (2.0, True), (2.5, False),
                                               (None, False)])
def test_a_release_bound_within_release_timeout_runs_on_the_workload_thread(
        tmp_path: Path, bound: float | None, inline: bool) -> None:
    lock = _Recorded(bound)
    ops = one_session(lock, tmp_path)
    assert [(op["type"], op["value"]) for op in ops] == [("invoke", {"session": 1}),
                                                         ("ok", {"session": 1})]
    assert (lock.threads == [threading.current_thread()]) is inline


@pytest.mark.parametrize("bound", [1.0, None])
def test_a_release_that_raises_is_recorded_alike_on_either_thread(
        tmp_path: Path, bound: float | None) -> None:
    certain = one_session(_Recorded(bound, TimeoutError("busy")), tmp_path / "a")
    unknown = one_session(_Recorded(bound, Indeterminate("cut")), tmp_path / "b")
    assert (certain[-1]["type"], certain[-1]["error"]) == ("fail", "timeout: TimeoutError: busy")
    assert (unknown[-1]["type"], unknown[-1]["error"]) == ("info", "Indeterminate: cut")


@pytest.mark.parametrize("bound", ["soon", True])
def test_a_release_bound_that_is_no_number_stops_the_client_with_why(
        tmp_path: Path, bound: object) -> None:
    with pytest.raises(LockContractError, match=r"^_Recorded.release_bound\(\) returned "
                                                r".+, not seconds or None$"):
        one_session(_Recorded(bound), tmp_path)  # type: ignore[arg-type]


def test_the_redis_recipes_bound_their_release_on_one_node_only() -> None:
    node = (Node("n1", "127.0.0.1", 1),)
    assert SetNxLock(LockConfig(nodes=node, op_timeout=0.5)).release_bound() == 3.0
    sentinel = LockConfig(nodes=node, harness={"sentinels": [{"host": "127.0.0.1",
                                                              "port": 1}]})
    assert SetNxLock(sentinel).release_bound() is None


def test_a_bounded_release_to_a_silent_server_is_unknown_within_its_bound(
        tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    lock = SetNxLock(LockConfig(nodes=(Node("n1", "127.0.0.1", server.getsockname()[1]),),
                                op_timeout=0.3))
    journal = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    workload = LockWorkload(MutexParams(process=0), lock, None, journal, threading.Event())
    assert workload.release_inline
    started = time.monotonic()
    workload.release(Grant(handle="mine"))
    assert 0.25 < time.monotonic() - started < lock.release_bound()
    journal.close()
    done = read_journal(journal.path)[-1]
    assert (done["type"], done["error"]) == ("info", "Indeterminate: timeout: no reply within "
                                                     "0.3 s")
    lock.close()
    for s in (server, *held):
        s.close()


@pytest.mark.parametrize(("acquire_timeout", "end_in", "shown"), [
    (1.23456, None, 1.235),  # no end: the whole timeout, to the ms
    (1.23456, 60.0, 1.235),  # the end far off: the same
    (5.0, -1.0, 0.1),  # the end passed: the least wait
])
def test_an_acquire_s_invoke_shows_the_timeout_it_waits_to_the_ms(
        tmp_path: Path, acquire_timeout: float, end_in: float | None, shown: float) -> None:
    end_ns = None if end_in is None else time.monotonic_ns() + int(end_in * 1e9)
    journal = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    workload = LockWorkload(MutexParams(process=0, acquire_timeout=acquire_timeout,
                                        end_ns=end_ns), _Recorded(1.0), None, journal,
                            threading.Event())
    workload.acquire()
    journal.close()
    assert read_journal(journal.path)[0]["value"] == {"timeout": shown}


def test_an_acquire_near_the_run_s_end_shows_the_time_left_to_the_ms(tmp_path: Path) -> None:
    journal = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    before = time.monotonic_ns()
    workload = LockWorkload(MutexParams(process=0, acquire_timeout=5.0,
                                        end_ns=before + 2_500_000_000), _Recorded(1.0), None,
                            journal, threading.Event())
    workload.acquire()
    journal.close()
    shown = read_journal(journal.path)[0]["value"]["timeout"]
    left = (before + 2_500_000_000 - time.monotonic_ns()) / 1e9
    assert left - 0.001 <= shown <= 2.5 and shown == round(shown, 3)


def test_a_request_the_kernel_takes_in_parts_is_sent_whole() -> None:
    """A request larger than the socket's buffers, to a server that starts to read it only
    after op_timeout: the first write returns part of it when SO_SNDTIMEO runs out, the rest
    follows once the server reads, and the reply is the request's."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    value = "v" * (8 << 20)
    expected = len(hiredis.pack_command(("SET", "k", value)))
    got: list[int] = []

    def serve() -> None:
        conn, _ = server.accept()
        time.sleep(0.3)  # past the client's 0.2 s: its first write gave up part way
        n = 0
        while n < expected:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            n += len(chunk)
        got.append(n)
        conn.sendall(b"+OK\r\n")
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    client = LeanRedis("127.0.0.1", server.getsockname()[1], 0.2)
    started = time.monotonic()
    assert client.resp.call("SET", "k", value) == b"OK"
    assert got == [expected] and time.monotonic() - started > 0.25  # longer than one write
    client.close()
    server.close()
