"""The client protocol without servers: its messages, a real program behind ExternalLock (a toy
that grants at once), every way a program can break, process groups, builds and the registry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.controller.clients import Clients
from harness.controller.procs import ProcessTable
from harness.controller.registry import Registry
from harness.controller.store import RunDir
from harness.core.cluster import Node, client_name
from harness.core.errors import UsageError
from harness.core.locks import Grant, Indeterminate, LockConfig, Refused
from tests.external_programs import starts, toy
from tests.harness_runs import bounded
from workloads.external import builds, protocol
from workloads.external.protocol import ProtocolError
from workloads.locks import external
from workloads.locks.external import ExecLock, StartError

REPO = Path(__file__).resolve().parents[1]
NODES = (Node("n1", "127.0.0.1", 1), Node("n2", "127.0.0.1", 2))


# messages ------------------------------------------------------------------------------------
def test_a_reply_is_read_field_by_field() -> None:
    r = protocol.parse_reply(b'{"id": 3, "type": "ok", "token": 17, "validity": 1.5, '
                             b'"handle": {"k": 1}, "note": "x"}', 3, "acquire")
    assert (r.type, r.token, r.validity, r.handle, r.extra) == ("ok", 17, 1.5, {"k": 1},
                                                                 {"note": "x"})
    assert protocol.parse_reply('{"id":1,"type":"ok","held":false}', 1, "held").held is False


@pytest.mark.parametrize(("line", "words"), [
    ("Exception in thread main", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"id": 4, "type": "ok"}', "answer to request 4 while waiting for 3"),
    ('{"id": 3, "type": "maybe"}', "type must be ok, fail or info"),
    ('{"id": 3, "type": "ok", "token": "17"}', "token must be an integer"),
    ('{"id": 3, "type": "ok", "token": true}', "token must be an integer"),
    ('{"id": 3, "type": "ok", "validity": "2s"}', "validity must be a number"),
    ("", "an empty line"),
])
def test_anything_else_is_a_protocol_error(line: str, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        protocol.parse_reply(line, 3, "acquire")


def test_a_held_answer_must_say_yes_or_no() -> None:
    with pytest.raises(ProtocolError, match="held true or false"):
        protocol.parse_reply('{"id": 1, "type": "ok"}', 1, "held")


def test_the_hello_reply_declares_tokens_and_features() -> None:
    h = protocol.parse_hello('{"type":"ok","name":"x","version":"2","tokens":true,'
                             '"features":["held"]}')
    assert (h.name, h.version, h.tokens, h.features) == ("x", "2", True, frozenset({"held"}))
    with pytest.raises(ProtocolError, match="hello refused: no ZooKeeper"):
        protocol.parse_hello('{"type": "fail", "error": "no ZooKeeper"}')
    with pytest.raises(ProtocolError, match="unknown feature 'steal'"):
        protocol.parse_hello('{"type": "ok", "features": ["steal"]}')
    with pytest.raises(ProtocolError, match="tokens must be true or false"):
        protocol.parse_hello('{"type": "ok", "tokens": "yes"}')


def test_requests_are_one_compact_line_without_empty_fields() -> None:
    line = protocol.encode(protocol.request(7, "release", token=None, handle="h"))
    assert line == b'{"id":7,"op":"release","handle":"h"}\n'
    with pytest.raises(ValueError):
        protocol.request(1, "steal")


# a real program behind the lock ---------------------------------------------------------------
def lock_for(program: Path, *, needs_tokens: bool = False, ttl: float = 2.0) -> ExecLock:
    return ExecLock(LockConfig(nodes=NODES, ttl=ttl, process=3, options={"flavour": "plain"},
                               harness={"seed": 1, "program": str(program), "source": "127.0.0.1",
                                        "workload_needs_tokens": needs_tokens}))


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers are due within 1 s beyond an acquire's timeout; restarts come at once."""
    monkeypatch.setattr(external, "REPLY_MIN", 1.0)
    monkeypatch.setattr(external, "REPLY_TTLS", 0)
    monkeypatch.setattr(external, "RESTART_MIN", 0.01)


def test_a_program_grants_releases_and_says_what_it_can(tmp_path: Path) -> None:
    lock = lock_for(toy(tmp_path))
    try:
        assert (lock.hello.name, lock.hello.tokens) == ("toy", True)
        grant = lock.acquire(1.0)
        assert grant is not None and grant.token == 1 and grant.validity == 2.0
        assert lock.held(grant) is True  # type: ignore[attr-defined]
        longer = lock.extend(grant)  # type: ignore[attr-defined]
        assert longer is not None and longer.token == 1 and longer.handle == grant.handle
        assert lock.release(grant) is True
        second = lock.acquire(1.0)
        assert second is not None and second.token == 2
        assert lock.release(Grant(token=1, handle=second.handle)) is False  # a "fail" answer
    finally:
        lock.close()


def test_the_hello_tells_the_program_its_nodes_through_relays(tmp_path: Path) -> None:
    lock = lock_for(toy(tmp_path))
    try:
        hello = lock.greeting()
        assert [n["name"] for n in hello["nodes"]] == ["n1", "n2"]
        assert [(n["host"], n["port"]) for n in hello["nodes"]] == [r.address for r in lock.relays]
        assert hello["options"] == {"flavour": "plain"}  # the harness's own options stay out
        assert (hello["process"], hello["ttl"], hello["source"]) == (3, 2.0, "127.0.0.1")
    finally:
        lock.close()


def test_a_busy_lock_is_a_fail_and_an_unknown_outcome_is_indeterminate(tmp_path: Path) -> None:
    busy, unsure = lock_for(toy(tmp_path, "busy")), lock_for(toy(tmp_path, "info"))
    try:
        with pytest.raises(Refused, match=r"^lock busy$"):  # a None that says why
            busy.acquire(0.5)
        with pytest.raises(Indeterminate, match="connection lost"):
            unsure.acquire(0.5)
        assert unsure.program is not None and unsure.program.alive()  # info is an answer
    finally:
        busy.close()
        unsure.close()


@pytest.mark.parametrize(("mode", "words"), [
    ("exit-at-start", "exited with code 3 before it answered hello \\(its last words: toy: "
                      "cannot reach the lock service\\)"),
    ("garbage-hello", "broke the protocol at hello: not JSON: Picked up JAVA_TOOL_OPTIONS"),
    ("refuse-hello", "hello refused: no ZooKeeper at 127.0.0.1"),
])
def test_a_program_that_cannot_start_is_one_line(tmp_path: Path, mode: str, words: str) -> None:
    with pytest.raises(StartError, match=words) as caught:
        lock_for(toy(tmp_path, mode))
    assert "\n" not in str(caught.value)


def test_a_missing_program_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(StartError, match="not an executable file"):
        lock_for(tmp_path / "nothing-here")


def test_a_run_that_needs_tokens_refuses_a_program_without(tmp_path: Path) -> None:
    with pytest.raises(StartError, match="carry no fencing tokens"):
        lock_for(toy(tmp_path, "no-tokens"), needs_tokens=True)
    lock_for(toy(tmp_path, "no-tokens", name="toy-2")).close()  # the mutex workload is fine


@pytest.mark.usefixtures("quick")
@pytest.mark.parametrize(("mode", "words"), [
    ("hang-acquire", "did not answer acquire within 1.5 s"),
    ("garbage-acquire", "broke the protocol \\(acquire\\): not JSON: <garbage>"),
    ("wrong-id", "answer to request 8 while waiting for 1"),
    ("tokenless-grant", "a grant without a token"),
])
def test_a_program_that_breaks_mid_run_is_indeterminate_then_restarted(
        tmp_path: Path, mode: str, words: str) -> None:
    program = toy(tmp_path, mode)
    lock = lock_for(program)
    try:
        with pytest.raises(Indeterminate, match=words):
            lock.acquire(0.5)
        assert lock.program is None  # killed: it cannot be trusted any more
        if mode == "tokenless-grant":
            return  # it breaks every time
        grant = lock.acquire(0.5)  # started again; it behaves from its second start on
        assert grant is not None and lock.incarnation == 2 and starts(program) == 2
        assert lock.release(grant) is True
    finally:
        lock.close()


@pytest.mark.usefixtures("quick")
def test_a_program_that_dies_holding_the_lock_leaves_its_grant_unknown(tmp_path: Path) -> None:
    lock = lock_for(toy(tmp_path, "die-after-acquire"))
    try:
        grant = lock.acquire(0.5)
        assert grant is not None
        time.sleep(0.3)
        assert lock.held(grant) is False  # type: ignore[attr-defined]
        with pytest.raises(Indeterminate, match="the program that took this grant is gone"):
            lock.release(grant)
        again = lock.acquire(0.5)
        assert again is not None and lock.incarnation == 2
        with pytest.raises(Indeterminate, match="gone"):  # an old grant stays unknown
            lock.release(grant)
    finally:
        lock.close()


def test_a_program_that_will_not_start_again_waits_between_tries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(external, "RESTART_MIN", 0.2)
    program = toy(tmp_path, "die-after-acquire")
    lock = lock_for(program)
    try:
        assert lock.acquire(0.5) is not None
        time.sleep(0.3)  # it has died since
        starts = tmp_path / "starts"  # one line per start of the broken program
        program.write_text(f"#!/bin/sh\necho start >>{starts}\n"
                           "echo 'toy: broken install' >&2\nexit 1\n")
        with pytest.raises(Indeterminate, match=r"could not start it again:.*exited with code 1"):
            lock.acquire(5.0)  # gives up at the first failed start, not after 5 s of them
        with pytest.raises(Indeterminate, match=r"is down .* next start in"):
            lock.acquire(0.01)  # backing off: not started again within this acquire
        assert starts.read_text() == "start\n"
    finally:
        lock.close()


def test_closing_ends_the_program(tmp_path: Path) -> None:
    lock = lock_for(toy(tmp_path))
    program = lock.program
    assert program is not None and program.alive()
    lock.close()
    assert not program.alive() and program.exit_status() == "exited with code 0"


FROZEN = """
import sys, time
from harness.core.cluster import Node
from harness.core.locks import LockConfig
from workloads.locks import external
external.REPLY_MIN, external.REPLY_TTLS = 1.0, 0
lock = external.ExecLock(LockConfig(nodes=(Node("n1", "127.0.0.1", 1),), harness={
    "program": sys.argv[1]}))
print("ready", flush=True)
grant = lock.acquire(0.2)
print("granted", grant.token, flush=True)
lock.close()
"""


def test_time_frozen_with_the_program_does_not_count_as_waiting(tmp_path: Path) -> None:
    """A pause stops the client and its program together: the answer is late by the pause,
    and must still be taken (1.2 s allowed, the whole group stopped for 3 s)."""
    program = toy(tmp_path, "slow-acquire")
    proc = subprocess.Popen([sys.executable, "-c", FROZEN, str(program)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "TOY_DELAY": "0.4"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.1)  # the acquire is under way, the toy is sleeping before it answers
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(3.0)
        os.killpg(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert out.strip() == "granted 1"


HOLDING = """
import sys, time
from harness.core.cluster import Node
from harness.core.locks import LockConfig
from workloads.locks.external import ExecLock
lock = ExecLock(LockConfig(nodes=(Node("n1", "127.0.0.1", 1),), harness={"program": sys.argv[1]}))
print(lock.program.pid, flush=True)
time.sleep(60)
"""


def test_a_program_dies_with_its_client_even_a_client_killed_alone(tmp_path: Path) -> None:
    """SIGKILL of the client's pid only (the controller dying takes its clients this way): the
    kernel kills the program too (PR_SET_PDEATHSIG), nothing is left holding a session."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDING, str(toy(tmp_path, "deaf"))], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    program = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and group_states(proc.pid).get(program, "Z") != "Z":
        time.sleep(0.05)
    assert group_states(proc.pid).get(program, "Z") == "Z"


# process groups ------------------------------------------------------------------------------
def group_states(leader: int) -> dict[int, str]:
    """State letter of every process in ``leader``'s process group."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == leader:
            out[int(entry.name)] = fields[0]
    return out


def test_a_client_is_paused_resumed_and_killed_with_its_program(tmp_path: Path) -> None:
    """The client's pause and resume reach every process of its group (its lock program)."""
    table = ProcessTable(tmp_path / "pids.json")
    clients = Clients(table, RunDir(tmp_path), [0])
    proc = table.spawn(client_name(0), ["sh", "-c", "sleep 30 & sleep 30 & wait"],
                       tmp_path / "c0.log")
    try:
        deadline = time.monotonic() + 5
        while len(group_states(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(group_states(proc.pid)) == 3
        assert clients.pause(0)
        time.sleep(0.2)
        assert set(group_states(proc.pid).values()) == {"T"}
        assert clients.resume(0)
        time.sleep(0.2)
        assert "T" not in set(group_states(proc.pid).values())
    finally:
        table.kill_all()
    time.sleep(0.2)
    assert set(group_states(proc.pid).values()) <= {"Z"}  # dead (init reaps the orphans)


CRASHING = """
import subprocess, sys, time
from workloads import crash
child = subprocess.Popen(["sleep", "30"])
print(child.pid, flush=True)
crash.configure(sys.argv[1])
crash.point("holding")
time.sleep(30)
"""


def test_a_crash_point_kills_the_client_and_its_program(tmp_path: Path) -> None:
    armed = tmp_path / "crash"
    armed.write_text("holding\n")
    proc = subprocess.Popen([sys.executable, "-c", CRASHING, str(armed)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert proc.wait(10) == -signal.SIGKILL
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text()


# builds --------------------------------------------------------------------------------------
@pytest.fixture
def clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "clients"
    (root / "hello").mkdir(parents=True)
    (root / "hello" / "build.sh").write_text(textwrap.dedent("""\
        set -e
        [ -f fail ] && { echo "hello: javac is missing"; exit 1; }
        printf '#!/bin/sh\\necho built\\n' > "$1/client"
        chmod +x "$1/client"
        echo built >> "$(dirname "$1")/count"
        """))
    monkeypatch.setattr(builds, "CLIENTS", root)
    monkeypatch.setenv("LOCK_HARNESS_CLIENT_CACHE", str(tmp_path / "cache"))
    return root


def test_a_build_is_cached_by_its_sources(clients: Path, tmp_path: Path) -> None:
    assert builds.names() == ["hello"] and builds.built("hello") is None
    out, fresh = builds.build("hello")
    assert fresh and builds.built("hello") == out and (out / "client").is_file()
    assert builds.build("hello") == (out, False)
    (clients / "hello" / "Main.java").write_text("class Main {}")
    changed, fresh = builds.build("hello")
    assert fresh and changed != out and not out.exists()  # the old build is gone
    assert (tmp_path / "cache" / "count").read_text().count("built") == 2


def test_a_failed_build_says_why_in_one_line(clients: Path) -> None:
    (clients / "hello" / "fail").write_text("")
    with pytest.raises(RuntimeError, match="building hello failed \\(1\\): hello: javac is "
                                           "missing"):
        builds.build("hello")
    assert builds.built("hello") is None
    reason = builds.not_built_reason("hello")
    assert "last build failed (hello: javac is missing" in reason and "\n" not in reason
    assert builds.main(["hello"]) == 1


def test_a_named_client_that_is_not_built_cannot_run(clients: Path) -> None:
    class Hello(external.ExternalLock):
        name = "hello"
        build = "hello"

    assert "not built; build it with `python -m workloads.external.builds hello`" in str(
        Hello.unavailable())
    builds.build("hello")
    assert Hello.unavailable() is None
    assert Hello.command(LockConfig(nodes=NODES))[0].endswith("/client")


# the registry and the command line -------------------------------------------------------------
def test_exec_path_is_a_lock_with_its_program(tmp_path: Path) -> None:
    program = toy(tmp_path)
    reg = Registry(entry_points=False)
    entry = reg.entry("locks", f"exec:{program}")
    assert entry.target == "workloads.locks.external:ExecLock"
    assert dict(entry.options) == {"program": str(program)}
    assert entry.record()["options"] == {"program": str(program)}
    assert reg.load("locks", f"exec:{program}") is ExecLock
    assert reg.lock_dbs(f"exec:{program}") == ()  # any db


def test_exec_of_something_that_does_not_run_is_bad_usage(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("x")
    reg = Registry(entry_points=False)
    for path in (tmp_path / "missing", tmp_path / "plain.txt", tmp_path):
        with pytest.raises(UsageError, match="is not an executable file"):
            reg.entry("locks", f"exec:{path}")


def test_harness_list_shows_each_external_client_and_whether_it_is_built(
        tmp_path: Path) -> None:
    env = {**os.environ, "LOCK_HARNESS_CLIENT_CACHE": str(tmp_path / "empty")}
    out = bounded([sys.executable, "-m", "harness.cli", "list"], cwd=REPO, env=env,
                  timeout=60).stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    for name, build in (("curator", "curator"), ("go-etcd-mutex", "go-etcd-mutex"),
                        ("node-redlock", "node-redlock"), ("redis-semaphore", "node-redlock")):
        assert f"external, NOT BUILT: python -m workloads.external.builds {build}" in lines[name]
    assert "exec:PATH" in lines


def test_a_named_client_that_is_not_built_is_refused_before_servers_start(
        tmp_path: Path) -> None:
    env = {**os.environ, "LOCK_HARNESS_CLIENT_CACHE": str(tmp_path / "empty")}
    proc = bounded([sys.executable, "-m", "harness.cli", "run", "--db", "etcd", "--lock",
                    "go-etcd-mutex", "--store", str(tmp_path / "results"), "--quiet"],
                   cwd=REPO, env=env, timeout=60)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "lock 'go-etcd-mutex': not built" in lines[0], proc.stderr


def test_a_fail_error_that_says_its_kind_already_is_not_said_twice() -> None:
    from workloads.mutex import prefixed

    assert prefixed("timeout: ", "timeout: lock busy") == "timeout: lock busy"  # Curator's
    assert prefixed("not-held: ", "lost: a refresh found the key gone") == (
        "not-held: lost: a refresh found the key gone")
