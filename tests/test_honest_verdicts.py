"""Verdicts that never lie (issue 11): bad input is one line and never a verdict; a history
not understood is never valid; a fault that did not bite, a run that tested nothing or did
not finish is never a pass."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checker import faults
from harness.controller.store import RunDir
from tests.harness_runs import bounded, harness, history, run

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "runs" / "redis-setnx-pause"
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server missing")


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc.stderr


# bad usage: 64, one line, before anything starts ---------------------------------------------
@pytest.mark.parametrize(("toml", "says"), [
    ("nemesis = 5", "'nemesis' must be a name"),
    ("lock = 5", "'lock' must be a name"),
    ('workload = ["mutex"]', "'workload' must be a name"),
    ("seed = true", "'seed' must be an integer"),
    ("time-limit = nan", "'time-limit' must be a finite number"),
])
def test_type_errors_in_a_config_are_one_line(tmp_path: Path, toml: str, says: str) -> None:
    cfg = tmp_path / "spec.toml"
    cfg.write_text(toml + "\n")
    proc = harness("run", "--config", str(cfg), "--store", str(tmp_path / "s"))
    assert proc.returncode == 64 and says in one_line(proc)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--nemesis", "clock", "--nemesis-opt", "clock-offset=abc"], "expected a number"),
    (["--nemesis", "clock", "--nemesis-opt", "nosuch=1"], "not an option of"),
    (["--nemesis", "pause", "--nemesis-opt", "kill-delay=3"], "not an option of"),
    (["--time-limit", "nan"], "finite number"),
    (["--time-limit", "inf"], "finite number"),
    (["--ttl", "nan"], "finite number"),
    (["--db", "zookeeper", "--lock", "redis-setnx"], "runs on --db redis"),
])
def test_bad_flags_are_one_line_before_any_server_starts(tmp_path: Path, args: list[str],
                                                         says: str) -> None:
    proc = harness("run", "--store", str(tmp_path / "s"), *args)
    assert proc.returncode == 64 and says in one_line(proc)
    assert not (tmp_path / "s").exists()


def test_serve_on_an_impossible_port_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    proc = harness("serve", "--store", str(tmp_path / "s"), "--port", "99999")
    assert proc.returncode == 64 and "port" in one_line(proc)


def test_a_name_cannot_leave_the_store() -> None:
    from harness.controller.spec import TestSpec

    for name in ("..", "../x", "/etc", "a/../../b"):
        test = TestSpec.from_dict({"name": name}).test_name
        assert "/" not in test and test not in (".", "..")


# histories the checker does not understand -------------------------------------------------
def check(*args: str) -> subprocess.CompletedProcess[str]:
    return harness("check", *args, timeout=120)


def test_an_empty_history_is_unknown(tmp_path: Path) -> None:
    for name in ("h.jsonl", "h.edn"):
        (tmp_path / name).write_text("")
        proc = check(str(tmp_path / name))
        assert proc.returncode == 2 and "UNKNOWN" in proc.stdout, proc.stdout + proc.stderr


def test_a_cas_register_log_is_checked_as_one_without_model(tmp_path: Path) -> None:
    h = tmp_path / "cas.edn"
    h.write_text("\n".join([
        "{:type :invoke, :f :write, :value 1, :process 0}",
        "{:type :ok, :f :write, :value 1, :process 0}",
        "{:type :invoke, :f :cas, :value [1 2], :process 1}",
        "{:type :ok, :f :cas, :value [1 2], :process 1}",
        "{:type :invoke, :f :read, :value nil, :process 0}",
        "{:type :ok, :f :read, :value 1, :process 0}"]) + "\n")
    proc = check(str(h))
    assert proc.returncode == 1 and "as cas-register (inferred" in proc.stdout
    proc = check(str(h), "--model", "mutex")
    assert proc.returncode == 64 and "--model cas-register" in one_line(proc)


def test_a_missing_file_is_said_as_such(tmp_path: Path) -> None:
    proc = check(str(tmp_path / "nope.edn"), "--model", "mutex")
    assert proc.returncode == 64 and "no such file" in one_line(proc)


def copy_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "t" / "r"
    shutil.copytree(DATA, run_dir)
    return run_dir


def edit_json(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def edit_history(run_dir: Path, change: object) -> None:
    lines = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    change(lines)  # type: ignore[operator]
    (run_dir / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def last_read(ops: list[dict[str, object]]) -> dict[str, object]:
    return next(op for op in reversed(ops) if op["f"] == "read" and op["type"] == "ok")


@pytest.mark.parametrize(("damage", "code", "says"), [
    (lambda d: edit_json(d / "test.json", lambda t: t.update(spec=[])), 3, "no spec"),
    (lambda d: edit_json(d / "test.json", lambda t: t["spec"].update(ttl="abc")), 3,
     "'ttl' must be a finite number"),
    (lambda d: edit_history(d, lambda h: last_read(h)["value"][0].update(seq="a")), 3,
     "field 'seq'"),
    (lambda d: edit_history(d, lambda h: next(o for o in h if o.get("token") is None
                                              and o["f"] == "acquire").update(token="7")),
     3, "'token' must be an integer"),
    (lambda d: edit_history(d, lambda h: h[3].update(type=["invoke"])), 3, "unknown type"),
    (lambda d: edit_history(d, lambda h: h[3].update(process="\ud800\x1b[2J")), 3,
     "lone surrogate"),
    (lambda d: edit_history(d, lambda h: h[3].update(process="\x1b[2J")), 3,
     "client op from a non-client process"),
])
def test_a_damaged_run_directory_is_one_line_never_a_verdict(tmp_path: Path, damage: object,
                                                             code: int, says: str) -> None:
    run_dir = copy_run(tmp_path)
    damage(run_dir)  # type: ignore[operator]
    proc = check(str(run_dir))
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert says in one_line(proc)
    assert "\x1b" not in proc.stdout + proc.stderr  # a strange process name is shown escaped


def test_a_results_file_that_cannot_be_written_is_one_line_never_a_verdict(
        tmp_path: Path) -> None:
    """A re-check leaves the run as it was (its results.json is not read, nor written); asked
    to write over it (--write) where it cannot, it says so in one line, exit 3."""
    run_dir = copy_run(tmp_path)
    (run_dir / "results.json").unlink()
    (run_dir / "results.json").mkdir()
    assert check(str(run_dir)).returncode == 1  # its overlaps, judged beside it
    proc = check("--write", str(run_dir))
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 3 and "results.json" in one_line(proc), proc.stdout + proc.stderr


def test_a_run_that_did_not_finish_is_never_valid(tmp_path: Path) -> None:
    run_dir = copy_run(tmp_path)
    edit_json(run_dir / "test.json", lambda t: t.update(status="starting"))
    edit_history(run_dir, lambda h: h.__delitem__(slice(20, None)))  # killed early on
    proc = check(str(run_dir))
    assert proc.returncode == 2, proc.stdout  # its first 20 ops hold no overlap: unknown
    results = RunDir(run_dir).rechecks()[-1].load_results()  # beside the run, as it was
    assert results["valid"] == "unknown" and "did not finish (status starting)" in \
        results["unfinished"]


def test_a_killed_run_says_so_whatever_the_verdict(tmp_path: Path) -> None:
    """Killed after its overlaps: INVALID (they stand), and both `harness check` and the
    report's banner still say the run did not finish."""
    run_dir = copy_run(tmp_path)
    edit_json(run_dir / "test.json", lambda t: t.update(status="starting"))
    proc = check(str(run_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "INVALID", proc.stdout
    assert lines[1].startswith("  unfinished: the run did not finish (status starting): the "
                               "violations it recorded stand"), proc.stdout
    page = RunDir(run_dir).rechecks()[-1].report.read_text()
    assert ('<span class="status" data-status="starting">KILLED: the run did not finish '
            "(killed, or its machine stopped)</span>") in page


def test_a_crashed_checker_is_exit_3_unless_a_violation_stands(tmp_path: Path) -> None:
    run_dir = copy_run(tmp_path)
    edit_json(run_dir / "test.json", lambda t: t["spec"].update(
        workload="tests.test_registry:BoomWorkload"))
    proc = check(str(run_dir))
    assert proc.returncode == 1  # mutex still finds the overlaps of this run: real
    assert "could not check: ZeroDivisionError" in proc.stdout
    edit_history(run_dir, lambda h: h.__delitem__(slice(0, None)))
    (run_dir / "history.jsonl").write_text(json.dumps(
        {"time": 0, "process": 0, "type": "invoke", "f": "acquire", "value": None}) + "\n" +
        json.dumps({"time": 1, "process": 0, "type": "ok", "f": "acquire", "value": None}) +
        "\n")
    proc = check(str(run_dir))
    assert proc.returncode == 3, proc.stdout + proc.stderr


# could-not-test wins -------------------------------------------------------------------------
def calls(*spans: tuple[int, str, float, float, str, str | None]) -> list[dict[str, object]]:
    """(process, f, invoked, ended, type, error) -> a well-formed history, in time order."""
    ops: list[dict[str, object]] = []
    for p, f, t0, t1, ty, error in spans:
        ops.append({"time": int(t0 * 1e9), "process": p, "type": "invoke", "f": f,
                    "value": None, "lock": "lock"})
        end = {"time": int(t1 * 1e9), "process": p, "type": ty, "f": f, "value": None,
               "lock": "lock"}
        if ty == "ok" and f == "acquire":
            end["value"] = {"session": int(t0 * 10), "validity": 2.0}
        ops.append({**end, "error": error} if error else end)
    ops.sort(key=lambda o: o["time"])  # type: ignore[arg-type, return-value]
    return [{"index": i, **o} for i, o in enumerate(ops)]


def checked(history: list[dict[str, object]]) -> tuple[dict[str, object], int]:
    from harness.controller.checking import check_history, exit_code

    results = check_history(history, {"workload": "lock", "ttl": 2.0})  # type: ignore[arg-type]
    return results, exit_code(results)


BROKEN = "RuntimeError: the plugin is broken"


def test_no_acquire_succeeded_names_the_most_frequent_error_and_its_count() -> None:
    results, code = checked(calls(
        (0, "acquire", 0.1, 0.2, "info", BROKEN), (1, "acquire", 0.15, 0.3, "info", BROKEN),
        (0, "acquire", 0.3, 0.4, "info", "ConnectionError: refused"),
        (0, "acquire", 0.5, 0.6, "info", BROKEN), (1, "acquire", 0.5, 3.0, "fail",
                                                   "timeout: lock busy")))
    assert code == 3 and results["valid"] == "unknown"
    assert results["could-not-test"] == (
        "no acquire succeeded: the run tested nothing; the most frequent client error, 3 of 5 "
        f"(first: process 0, acquire): {BROKEN}")


def test_a_client_whose_every_request_failed_could_not_test() -> None:
    """Process 2 asked three times and never had an answer: the run did not test the lock
    through it (exit 3, though the others' ops are valid); had the others overlapped, that
    violation would stand (exit 1), the reason beside it."""
    fine = ((0, "acquire", 0.1, 0.2, "ok", None), (0, "release", 0.5, 0.6, "ok", None),
            (1, "acquire", 0.3, 0.7, "ok", None), (1, "release", 1.2, 1.3, "ok", None))
    broken = tuple((2, "acquire", t, t + 0.9, "info", BROKEN) for t in (0.1, 1.1, 2.1))
    results, code = checked(calls(*fine, *broken))
    assert code == 3 and results["valid"] == "unknown"
    said = ("client(s) 2 never had an answer: all 3 of their requests failed (none ok), so the "
            "run did not test the lock through them; the most frequent client error, 3 of 3 "
            f"(first: process 2, acquire): {BROKEN}")
    assert results["could-not-test"] == said
    results, code = checked(calls(*fine, *broken[:2]))  # two: what a fault can do to anyone
    assert code == 0 and "could-not-test" not in results
    cut = tuple((2, "acquire", t, t + 0.9, "info", "timeout: Timeout reading from socket")
                for t in (0.1, 1.1, 2.1))
    results, code = checked(calls(*fine, *cut))  # timeouts: what a partition does to anyone
    assert code == 0 and "could-not-test" not in results
    overlap = (*fine[:2], (1, "acquire", 0.3, 0.4, "ok", None), fine[3])
    results, code = checked(calls(*overlap, *broken))
    assert code == 1 and results["valid"] is False
    assert results["checks"]["mutex"]["valid"] is False  # type: ignore[index]
    assert results["could-not-test"] == said + ("; the violation the other clients' ops show "
                                                "stands")


def test_no_acquire_succeeded_wins_over_a_verdict_built_from_the_errors() -> None:
    """Issue 24 case 4: three clients' acquires all fail for 15 s; liveness makes a stuck lock
    of them, but the run tested nothing: exit 3, the error named. Issue 40: and liveness's
    verdict is withdrawn with it (no "liveness INVALID", no incident "a stuck lock ... the lock
    let it happen on its own")."""
    from harness.presentation.report.incidents import incidents
    from harness.presentation.report.model import explained_items

    spans = [(p, "acquire", t / 10, t / 10 + 0.5, "info", "HTTPError: 400 Bad Request")
             for p in range(3) for t in range(1 + p, 150, 6)]
    history = calls(*spans)
    results, code = checked(history)
    liveness = results["checks"]["liveness"]  # type: ignore[index]
    assert liveness["valid"] == "unknown" and liveness["withdrawn"] is True
    assert liveness["stuck-lock-count"] == 1  # what it found stays, as a withdrawn check's
    assert not any(c.get("valid") is False for c in results["checks"].values())  # type: ignore[attr-defined]
    assert incidents(history, results) == []
    assert all(x.info for x in explained_items(results))
    assert code == 3 and results["valid"] == "unknown"
    assert results["could-not-test"] == (
        "no acquire succeeded: the run tested nothing; the most frequent client error, "
        f"{len(spans)} of {len(spans)} (first: process 0, acquire): HTTPError: 400 Bad Request;"
        " the checkers' verdict (invalid) rests on those failed requests and is no finding "
        "about the lock")


def test_a_run_that_stopped_on_a_client_error_never_says_no_error() -> None:
    """Issue 40: every client died of a plugin's KeyError before its first op; the history is
    empty, the run's error names the KeyError: the reason says so, never "no error"."""
    from harness.controller.checking import check_history

    died = ("client 0 exited early: client stopped: KeyError: 'sentinels' (at keylock.py:12)")
    results = check_history([], {"workload": "lock", "ttl": 2.0}, status="error", error=died)
    assert results["could-not-test"] == (
        "no acquire succeeded: the run tested nothing; no request ended in an error; the run "
        f"stopped: {died}")
    results = check_history([], {"workload": "lock", "ttl": 2.0})
    assert results["could-not-test"].endswith("; no request ended in an error")


def test_a_starved_client_or_one_still_waiting_is_no_could_not_test() -> None:
    """An acquire the lock answered "busy" (fail) is an answer; one still pending has none
    yet: neither is a client whose every request failed."""
    history = calls((0, "acquire", 0.1, 0.2, "ok", None), (0, "release", 0.5, 0.6, "ok", None),
                    (1, "acquire", 0.1, 2.1, "fail", "timeout: lock busy"),
                    (1, "acquire", 2.2, 2.25, "info", "ConnectionError: reset"))
    history.append({"index": len(history), "time": int(2.3e9), "process": 2,
                    "type": "invoke", "f": "acquire", "value": None, "lock": "lock"})
    results, code = checked(history)
    assert "could-not-test" not in results and code == 0, results


# real runs -----------------------------------------------------------------------------------
PLUGINS = '''
import socket
import subprocess
import sys
import uuid

import redis

from harness.core.locks import Grant, Indeterminate, LockConfig

UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"


class FromLoopback(redis.connection.Connection):
    """Connects from 127.0.0.1 whatever address its client process was given."""

    def _connect(self):
        sock = socket.create_connection((self.host, self.port), self.socket_connect_timeout,
                                        source_address=("127.0.0.1", 0))
        sock.settimeout(self.socket_timeout)
        return sock


class LoopbackLock:
    name = "loopback-lock"
    dbs = ("redis",)

    def __init__(self, config: LockConfig) -> None:
        n = config.nodes[0]
        pool = redis.ConnectionPool(connection_class=FromLoopback, host=n.host, port=n.port,
                                    socket_timeout=config.op_timeout,
                                    socket_connect_timeout=config.op_timeout)
        self.r = redis.Redis(connection_pool=pool)
        self.ttl = config.ttl
        self.unlock = self.r.register_script(UNLOCK)

    def acquire(self, timeout):
        me = uuid.uuid4().hex
        try:
            ok = self.r.set("lock", me, nx=True, px=int(self.ttl * 1000))
        except redis.RedisError as e:
            raise Indeterminate(str(e)) from e
        return Grant(validity=self.ttl, handle=me) if ok else None

    def release(self, grant):
        return bool(self.unlock(keys=["lock"], args=[grant.handle]))


FORWARDER = """
import socket, sys, threading
up = (sys.argv[1], int(sys.argv[2]))
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    down, _ = server.accept()
    upstream = socket.create_connection(up)
    threading.Thread(target=pump, args=(down, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, down), daemon=True).start()
"""


def die_with_parent():
    import ctypes
    import signal as sig
    ctypes.CDLL("libc.so.6").prctl(1, sig.SIGKILL)


class OwnThenEscaped(redis.connection.Connection):
    """Its first connection is the client's own; every reconnection (after a timeout, say)
    goes through a helper process that left the client's group: what a library with a helper
    daemon of its own does. Nothing the harness can route or see from the start."""

    forward_port = None

    def _connect(self):
        cls = OwnThenEscaped
        if cls.forward_port is None:
            cls.forward_port = 0
            return super()._connect()
        if cls.forward_port == 0:
            helper = subprocess.Popen([sys.executable, "-c", FORWARDER, self.host,
                                       str(self.port)], stdout=subprocess.PIPE, text=True,
                                      group=0, extra_groups=[], preexec_fn=die_with_parent)
            cls.forward_port = int(helper.stdout.readline())
        sock = socket.create_connection(("127.0.0.1", cls.forward_port),
                                        self.socket_connect_timeout)
        sock.settimeout(self.socket_timeout)
        return sock


class LateLoopbackLock(LoopbackLock):
    """Passes the start-up check of its connections (they come from its own address), then,
    once a partition has broken its connection, reconnects through its escaped helper."""

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        n = config.nodes[0]
        pool = redis.ConnectionPool(connection_class=OwnThenEscaped, host=n.host, port=n.port,
                                    socket_timeout=config.op_timeout,
                                    socket_connect_timeout=config.op_timeout, max_connections=1)
        self.r = redis.Redis(connection_pool=pool)
        self.unlock = self.r.register_script(UNLOCK)


class RaisingLock:
    dbs = ("redis",)

    def __init__(self, config: LockConfig) -> None:
        pass

    def acquire(self, timeout):
        raise RuntimeError("the plugin is broken")

    def release(self, grant):
        return True


class BoolLock(LoopbackLock):
    def acquire(self, timeout):
        return super().acquire(timeout) is not None


class SendAndCloseReleaseLock(LoopbackLock):
    """Its release sends the compare-and-delete on a connection of its own and closes it
    without reading the reply: it waits for nothing, and says so."""

    release_waits = False

    def __init__(self, config: LockConfig) -> None:
        super().__init__(config)
        n = config.nodes[0]
        self.node, self.wait = (n.host, n.port), config.op_timeout

    def release(self, grant):
        words = [b"EVAL", UNLOCK.encode(), b"1", b"lock", grant.handle.encode()]
        command = b"*%d\\r\\n" % len(words) + b"".join(b"$%d\\r\\n%s\\r\\n" % (len(w), w)
                                                       for w in words)
        with socket.create_connection(self.node, self.wait) as s:
            s.sendall(command)
        return True
'''


def plugin_run(tmp_path: Path, store: Path, *args: str
               ) -> tuple[int, dict[str, object], Path, str]:
    (tmp_path / "honest_plugins.py").write_text(PLUGINS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = bounded([sys.executable, "-m", "harness.cli", "run", "--store", str(store),
                    "--quiet", *args], env=env, timeout=240)
    latest = (store / "latest").resolve()
    path = latest / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    return proc.returncode, results, latest, proc.stdout + proc.stderr


@pytest.mark.servers
@needs_redis
def test_a_refused_release_after_the_lease_expired_is_no_violation(store: Path) -> None:
    """One client, paused past its lease: its release is refused ("not-held") and it acquires
    again. Nobody else can hold the lock: every checker must say valid."""
    code, results, _, out = run(store, "--clients", "1", "--nemesis", "pause",
                                "--time-limit", "12", "--seed", "3")
    assert code == 0, out
    checks = results["checks"]  # type: ignore[index]
    assert checks["linearizable"]["valid"] is True
    assert checks["stats"]["counts"]["release"]["fail"] >= 1  # the refusals happened


@pytest.mark.servers
@needs_redis
def test_a_plugin_whose_acquire_always_raises_could_not_test(tmp_path: Path,
                                                              store: Path) -> None:
    code, results, run_dir, out = plugin_run(tmp_path, store, "--lock",
                                             "honest_plugins:RaisingLock", "--nemesis", "none",
                                             "--time-limit", "4")
    assert code == 3, out
    failed = [op for op in history(run_dir) if op["f"] == "acquire" and op["type"] == "info"]
    said = (f"could not test: no acquire succeeded: the run tested nothing; the most frequent "
            f"client error, {len(failed)} of {len(failed)} (first: process ")
    assert failed and said in out and "RuntimeError: the plugin is broken" in out, out
    assert said[len("could not test: "):] in results["could-not-test"]  # type: ignore[operator]
    assert results["valid"] == "unknown"


def in_windows(run_dir: Path, fault: str) -> tuple[dict[str, object], list[tuple[str, str, int]]]:
    """The fault's claim and (f, type, ns taken) of each lock op of a client invoked and
    ended inside one of its windows, from the history."""
    ops = history(run_dir)
    starts = [op for op in ops if op["process"] == "nemesis" and op["f"] == fault
              and op["value"] == "start" and op["type"] == "info"]
    stops = [op["time"] for op in ops if op["process"] == "nemesis" and op["f"] == fault
             and op["value"] == "stop" and op["type"] == "invoke"]
    assert starts and len(stops) == len(starts)
    windows = [(a["time"], b) for a, b in zip(starts, stops, strict=True)]
    pending: dict[object, dict[str, object]] = {}
    out = []
    for op in ops:
        if op["process"] == "nemesis" or op["f"] not in ("acquire", "release"):
            continue
        if op["type"] == "invoke":
            pending[op["process"]] = op
            continue
        began = pending.pop(op["process"])["time"]
        if any(a < began and op["time"] < b for a, b in windows):
            out.append((op["f"], op["type"], op["time"] - began))
    return starts[0]["expect"], out


@pytest.mark.servers
@needs_redis
def test_a_release_that_waits_for_no_reply_is_no_proof_a_delay_did_not_bite(
        tmp_path: Path, store: Path) -> None:
    """Issue 24 case 3: the lock says its release does not wait (``release_waits = False``);
    its releases take a millisecond under a 0.2 s delay, its acquires the delay's round trip.
    The faults check counts the acquires, not the releases: the delay bit, and the run is
    VALID (a SET NX PX lock with nothing but latency is safe)."""
    code, results, run_dir, out = plugin_run(tmp_path, store, "--lock",
                                             "honest_plugins:SendAndCloseReleaseLock",
                                             "--nemesis", "delay", "--time-limit", "8",
                                             "--seed", "1")
    assert code == 0, out
    check = results["checks"]["faults"]  # type: ignore[index]
    assert check["valid"] is True and check["ineffective-count"] == 0, check
    assert check["release-waits"] is False
    # no whole window tested unavailability only; one the end of the run cut short may have
    # (a CI run: a second window from 7.41 s to the end at 8.0 s, in which two acquires
    # failed 'lock busy' and none was granted)
    short = [u for u in check["unavailable-only"] if u["until"] >= 8.0 - 0.05]
    assert check["unavailable-only-count"] == len(short), check["unavailable-only"]
    expect, done = in_windows(run_dir, "delay")
    least = expect["slowed"]["at-least"] * 1e9  # type: ignore[index]
    assert least == 0.2e9  # the lock waits its op timeout (1 s) for a reply: the old default
    assert [t for f, ty, t in done if f == "release" and ty == "ok" and t < least]  # fast
    slow = [t for f, ty, t in done if f == "acquire" and ty == "ok"]
    assert slow and min(slow) >= least - 5e6  # the evidence: acquires as slow as the delay
    counted = faults.FaultsChecker.check(history(run_dir))  # had the release been taken at its word
    assert counted["valid"] == "unknown" and "a release, took" in \
        counted["ineffective"][0]["explanation"]


@pytest.mark.servers
@needs_redis
def test_redlock_under_the_default_delay_completes_lock_ops_inside_the_windows(
        store: Path) -> None:
    """Issue 24 case 5: Redlock waits TTL/20 = 0.1 s for each master; the default delay is
    its own (20 +- 10 ms each way), so quorums form, slowly, under it. Latency alone breaks
    no Redlock property (the acquisition time is taken off the validity; no pause, no clock
    jump): VALID, with the delay shown to bite."""
    code, results, run_dir, out = run(store, "--db", "redis-masters", "--lock", "redlock",
                                      "--nemesis", "delay", "--time-limit", "10", "--seed", "1")
    assert code == 0, out
    check = results["checks"]["faults"]  # type: ignore[index]
    assert check["valid"] is True and check["unavailable-only-count"] == 0, check
    expect, done = in_windows(run_dir, "delay")
    assert expect["slowed"]["at-least"] == 0.02  # type: ignore[index]
    acquired = [t for f, ty, t in done if f == "acquire" and ty == "ok"]
    released = [t for f, ty, t in done if f == "release" and ty == "ok"]
    assert acquired and released, done
    assert min(released) >= 5 * 0.02e9  # five masters in turn, each a delayed round trip


@pytest.mark.servers
@pytest.mark.slow
@needs_redis
def test_redlock_under_a_delay_past_its_per_node_timeout_tested_unavailability_only(
        store: Path) -> None:
    """The old default, 0.2 +- 0.1 s each way, given explicitly: every master's reply comes
    after Redlock's 0.1 s, no quorum forms, no lock op completes in any window: the run
    tested Redlock without its masters, not under delay. Unknown, never valid."""
    code, results, run_dir, out = run(store, "--db", "redis-masters", "--lock", "redlock",
                                      "--nemesis", "delay", "--nemesis-opt", "delay=0.2",
                                      "--time-limit", "10", "--seed", "1")
    assert code == 2, out
    check = results["checks"]["faults"]  # type: ignore[index]
    assert check["valid"] == "unknown" and check["ineffective-count"] == 0
    assert check["unavailable-only-count"] == check["fault-count"] >= 1
    assert "delay tested unavailability only: no lock op of process(es) 0, 1, 2, 3, 4" in out
    assert (f"every fault of this run ({check['fault-count']}) tested unavailability only"
            in out)  # the summary says why the run proves nothing
    _, done = in_windows(run_dir, "delay")
    assert not [x for x in done if x[1] == "ok"], done


@pytest.mark.servers
@needs_redis
def test_a_plugin_that_breaks_the_lock_protocol_stops_with_the_cause(tmp_path: Path,
                                                                     store: Path) -> None:
    code, _, _, out = plugin_run(tmp_path, store, "--lock", "honest_plugins:BoolLock",
                                 "--nemesis", "none", "--time-limit", "4")
    assert code == 3, out
    assert "not a Grant or None" in out and "exited early" in out


# slow: 1 run of 8 on a quiet machine (and one CI run) the escaped client's only answers inside
# both windows were `fail` ("lock busy": its own timed-out release's key still held), and the
# faults check counts only ok completions as proof that a cut did not bite (a lock may return
# None with no reply at all, as Redlock does without a quorum): the run is then VALID.
@pytest.mark.slow
@pytest.mark.servers
@needs_redis
def test_a_partition_that_cut_nothing_is_never_a_pass(tmp_path: Path, store: Path) -> None:
    """The lock passes the start-up check of its connections; cut off by a partition, it
    reconnects through a helper process outside the client's group, which no cut reaches:
    the faults checker says so."""
    code, results, _, out = plugin_run(tmp_path, store, "--lock",
                                       "honest_plugins:LateLoopbackLock", "--nemesis",
                                       "partition", "--time-limit", "10", "--seed", "2")
    assert code == 2, out
    assert "partition did not cut process" in out
    assert results["checks"]["faults"]["valid"] == "unknown"  # type: ignore[index]


@pytest.mark.servers
@needs_redis
def test_connections_that_ignore_the_source_address_are_routed_or_noted(
        tmp_path: Path, store: Path) -> None:
    """A lock that connects from 127.0.0.1 whatever its client's address: with faults that
    cut clients, the run routes each client's connections through its own address (the
    client's group id and an SNAT rule), so the cut bites; without them, it is noted. Its
    SET NX PX lock is VALID under partitions: a cut-off holder's section (0.05-0.3 s) ends long
    before its 2 s lease runs out, and its release is then unknown, never a second holder."""
    code, results, run_dir, out = plugin_run(tmp_path, store, "--lock",
                                             "honest_plugins:LoopbackLock", "--nemesis",
                                             "partition", "--time-limit", "10", "--seed", "2")
    assert code == 0, out
    test = json.loads((run_dir / "test.json").read_text())
    assert test["client-connections"]["foreign"] == []  # routed: they come from their own
    assert test["faults"] and results["checks"]["faults"]["valid"] is True  # type: ignore
    code, _, run_dir, out = plugin_run(tmp_path, store, "--lock",
                                       "honest_plugins:LoopbackLock", "--nemesis", "none",
                                       "--time-limit", "4")
    assert code == 0, out  # no fault needs their source: the run goes on, noted
    test = json.loads((run_dir / "test.json").read_text())
    assert test["client-connections"]["foreign"] == ["127.0.0.1"]


@pytest.mark.servers
@needs_redis
def test_a_run_killed_with_sigkill_is_never_valid_on_recheck(store: Path) -> None:
    """Killed with -9 once its first grant is journaled, before any fault could matter: what
    it recorded holds no violation, and a run cut short is unknown (exit 2), never VALID."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--store", str(store),
                             "--quiet", "--nemesis", "partition", "--time-limit", "20"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
            '"type":"ok","f":"acquire"' in j.read_text()
            for j in (store / "latest" / "journals").glob("c*.jsonl")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    run_dir = (store / "latest").resolve()
    harness("clean", "--store", str(store))
    checked = harness("check", str(run_dir), timeout=120)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    results = RunDir(run_dir).rechecks()[-1].load_results()
    assert results["valid"] == "unknown" and results["unfinished"]


def test_a_bug_of_ours_in_any_command_is_one_line_and_exit_3(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Not Python's exit 1 with a traceback (1 is INVALID): seen when a suite's lazily
    imported module did not match the one already loaded."""
    from harness import cli

    def broken(args: object) -> int:
        raise ImportError("cannot import name 'x'")

    monkeypatch.setitem(cli.COMMANDS, "list", broken)
    assert cli.main(["list"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ImportError" in err
    saved = Path(err.rsplit("traceback: ", 1)[1].rstrip(")\n"))
    assert "raise ImportError" in saved.read_text()
    saved.unlink()
