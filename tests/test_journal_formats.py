"""A journal line written from its prepared format (:meth:`JournalWriter.put`) is byte for
byte the line :meth:`JournalWriter.record` writes for the same op: the hot path of a lock
workload changes no byte of its journal."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import journal as journal_module
from harness.core.journal import GROWTH, JournalWriter, encode, read_journal, token_json
from harness.core.locks import Grant, Indeterminate
from workloads.lock_only import LockWorkload
from workloads.mutex import MutexParams, Stop

NAMES = st.text(min_size=0, max_size=12)  # odd lock names: quotes, %, \0, unicode, emoji
NUMBERS = st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | NUMBERS | NAMES
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(NAMES, inner, max_size=3), max_leaves=8)
OPS = st.fixed_dictionaries({
    "process": st.integers(0, 10**6) | st.sampled_from(["nemesis", "p%d", "é"]),
    "type": st.sampled_from(["invoke", "ok", "fail", "info"]),
    "f": st.sampled_from(["acquire", "release", "write", "read"]) | NAMES,
    "value": VALUES,
    "lock": st.none() | NAMES,
    "token": st.none() | st.integers(0, 2**63) | NAMES,
    "time": st.integers(-(10**12), 10**18),
})


def lines_both_ways(ops: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """The journal bytes of ``ops`` written with record, then with put, the clock giving each
    op its ``time`` (t0 is 0) in both."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for way in ("record", "put"):
            path = Path(tmp) / f"{way}.jsonl"
            clock = iter([op["time"] for op in ops])
            with mock.patch.object(journal_module, "monotonic_ns", clock.__next__):
                w = JournalWriter(path, ops[0]["process"], 0)
                for op in ops:
                    if way == "record":
                        w.record(op["type"], op["f"], op["value"], lock=op["lock"],
                                 token=op["token"])
                    else:
                        form = w.line_format(op["type"], op["f"], op["lock"])
                        w.put(form, encode(op["value"]), token_json(op["token"]))
                w.close()
            out.append(path.read_bytes())
    return out[0], out[1]


@settings(max_examples=400, deadline=None)
@given(st.lists(OPS, min_size=1, max_size=6))
def test_a_line_from_its_format_is_the_line_record_writes(ops: list[dict[str, Any]]) -> None:
    for op in ops:
        op["process"] = ops[0]["process"]  # one writer: one process
    recorded, put = lines_both_ways(ops)
    assert put == recorded
    assert recorded.count(b"\n") == len(ops)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_a_format_filled_in_is_orjson_s_encoding_of_the_op(op: dict[str, Any]) -> None:
    """The format alone, any time: the bytes orjson gives the op record would build, then
    the newline."""
    w = JournalWriter(Path(tempfile.mkdtemp()) / "c.jsonl", op["process"], 0)
    try:
        form = w.line_format(op["type"], op["f"], op["lock"])
        t = max(0, op["time"])
        whole = {"time": t, "process": op["process"], "type": op["type"], "f": op["f"],
                 "value": op["value"]}
        if op["lock"] is not None:
            whole["lock"] = op["lock"]
        if op["token"] is not None:
            whole["token"] = op["token"]
        assert form % (t, encode(op["value"]), token_json(op["token"])) == encode(whole) + b"\n"
    finally:
        w.close()


def test_a_lone_surrogate_in_a_lock_name_reads_back_as_record_s_does(tmp_path: Path) -> None:
    """What orjson refuses (a half character, from an argument decoded with surrogateescape)
    is spelled as text in both; the reader's view is the same."""
    name = "k\udcff%"
    ops = []
    for way in ("record", "put"):
        w = JournalWriter(tmp_path / f"{way}.jsonl", 0, 0)
        if way == "record":
            w.record("ok", "release", {"session": 1}, lock=name, token=3)
        else:
            w.put(w.line_format("ok", "release", name), encode({"session": 1}), token_json(3))
        w.close()
        ops.append([{k: v for k, v in op.items() if k != "time"}
                    for op in read_journal(tmp_path / f"{way}.jsonl")])
    assert ops[0] == ops[1] == [{"process": 0, "type": "ok", "f": "release",
                                 "value": {"session": 1}, "lock": "k\\udcff%", "token": 3}]


def test_put_after_close_writes_nothing(tmp_path: Path) -> None:
    w = JournalWriter(tmp_path / "c.jsonl", 0, 0)
    form = w.line_format("invoke", "acquire", "k")
    w.put(form, b"null", b"")
    w.close()
    w.put(form, b"null", b"")
    assert (tmp_path / "c.jsonl").read_bytes().count(b"\n") == 1
    assert [op["value"] for op in read_journal(tmp_path / "c.jsonl")] == [None]


def test_threads_sharing_a_writer_lose_no_line_across_growths(tmp_path: Path) -> None:
    """Lines copied by several threads while one of them grows the file are all there, each
    whole and once (the nemesis's lanes share a writer; so does a release on its thread)."""


    w = JournalWriter(tmp_path / "c.jsonl", 0, 0)
    pad = "x" * 1000
    n = 3 * GROWTH // 1000 // 4

    def lane(k: int) -> None:
        form = w.line_format("info", f"lane{k}", "k")
        for i in range(n):
            if i % 2:
                w.put(form, encode({"i": i, "pad": pad}), b"")
            else:
                w.record("info", f"lane{k}", {"i": i, "pad": pad}, lock="k")

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert w.lines == 4 * n
    w.close()
    assert w.lines == 4 * n
    ops = read_journal(tmp_path / "c.jsonl")
    for k in range(4):
        assert [op["value"]["i"] for op in ops if op["f"] == f"lane{k}"] == list(range(n))
    assert len(ops) == 4 * n


class _Granting:
    """A lock in this process that grants at once, with the token given and the validities
    given in turn (the same objects again after the last: a lock's grants share a validity,
    or each has its own); the workload's own lines are what is tested, not a lock. The
    session's last release stops the workload."""

    def __init__(self, token: Any, validities: list[Any], released: bool, sessions: int,
                 stop: threading.Event) -> None:
        self.grants = [Grant(token, v, "mine") for v in validities]
        self.given = 0
        self.released, self.sessions, self.stop = released, sessions, stop

    def acquire(self, timeout: float) -> Grant:
        self.given += 1
        return self.grants[(self.given - 1) % len(self.grants)]

    def release(self, grant: Grant) -> bool:
        if self.given == self.sessions:
            self.stop.set()
        return self.released

    def release_bound(self) -> float:
        return 1.0


@settings(max_examples=200, deadline=None)
@given(st.none() | st.integers(0, 2**63) | NAMES, st.lists(st.none() | NUMBERS, min_size=1,
                                                           max_size=3),
       NAMES, st.integers(0, 10**6) | NAMES, st.integers(1, 5), st.booleans(),
       st.sampled_from([None, 60.0, 1.0, 0.01]))
def test_a_lock_workload_s_sessions_are_the_lines_record_would_write(
        token: Any, validities: list[Any], name: str, process: Any, sessions: int,
        released: bool, end_in: float | None) -> None:
    """Every line of the prepared sessions is orjson's encoding of the op record builds: the
    keys in record's order with record's values, and the bytes orjson makes of them; whether
    the grants' validity is the same object as the last one's (its line prepared once) or
    not, with or without a token, with the run's end far (the whole timeout shown) or near
    (the time left, 0.1 s at least)."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = JournalWriter(Path(tmp) / "c.jsonl", process, 0)
        stop = threading.Event()
        end_ns = None if end_in is None else time.monotonic_ns() + int(end_in * 1e9)
        workload = LockWorkload(MutexParams(process=0, lock_name=name, hold_min=0, hold_max=0,
                                            think_min=0, think_max=0, acquire_timeout=4.9876,
                                            end_ns=end_ns),
                                _Granting(token, validities, released, sessions, stop), None,
                                journal, stop)
        workload.run()
        journal.close()
        lines = journal.path.read_bytes().splitlines()
    expected: list[tuple[str, str, Any, dict[str, Any]]] = []
    for session in range(1, sessions + 1):
        tail = {"lock": name, **({} if token is None else {"token": token})}
        validity = validities[(session - 1) % len(validities)]
        expected += [("invoke", "acquire", {"timeout": 4.988}, {"lock": name}),
                     ("ok", "acquire", {"session": session, "validity": validity}, tail),
                     ("invoke", "release", {"session": session}, tail)]
        if released:
            expected.append(("ok", "release", {"session": session}, tail))
        else:
            expected.append(("fail", "release", {"session": session},
                             {**tail, "error": "not-held: the lock had expired or was taken"}))
    assert len(lines) == len(expected)
    for line, (type_, f, value, more) in zip(lines, expected, strict=True):
        op = orjson.loads(line)
        if f == "acquire" and type_ == "invoke" and end_in is not None and end_in < 4.9876:
            shown = op["value"]["timeout"]  # the time left when it was asked, 0.1 s at least
            assert shown == 0.1 if end_in <= 0.1 else 0.1 <= shown <= end_in
            value = {"timeout": shown}
        assert list(op.items())[1:] == list({"process": process, "type": type_, "f": f,
                                             "value": value, **more}.items())
        assert line == orjson.dumps(op)  # record's line: orjson's bytes of this op


class _Scripted:
    """A lock in this process whose acquires and releases go as scripted, session by session:
    an acquire's outcome (a grant, None, or an exception it raises) and its release's (True,
    False, or an exception). The last session's release stops the workload."""

    timeout_errors = (TimeoutError,)

    def __init__(self, script: list[tuple[Any, Any]], stop: threading.Event) -> None:
        self.script, self.stop, self.at = script, stop, -1

    def acquire(self, timeout: float) -> Any:
        self.at += 1
        outcome = self.script[self.at][0]
        if self.at == len(self.script) - 1 and not isinstance(outcome, Grant):
            self.stop.set()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def release(self, grant: Grant) -> bool:
        if self.at == len(self.script) - 1:
            self.stop.set()
        outcome = self.script[self.at][1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def release_bound(self) -> float:
        return 1.0


USUAL = Grant(None, 2.0, "mine")
SCRIPT = [(USUAL, True), (USUAL, True), (USUAL, True), (Grant(7, 2.0, "t"), True),
          (Grant(None, 3.5, "v"), True), (Grant(None, 3.5, "v"), True), (USUAL, True),
          (Indeterminate("cut"), None), (TimeoutError("busy"), None), (None, None),
          (USUAL, False), (USUAL, Indeterminate("lost")), (USUAL, TimeoutError("late")),
          (USUAL, True), (USUAL, True)]


@pytest.mark.parametrize("end_in", [None, 2.0, 5.0005])
@pytest.mark.parametrize("script", [SCRIPT, SCRIPT[:1], SCRIPT[7:], SCRIPT[9:11]])
def test_the_loop_of_empty_sessions_records_what_the_general_loop_does(
        tmp_path: Path, script: list[tuple[Any, Any]], end_in: float | None) -> None:
    """run_paired (hold 0, think 0, the client's Stop) writes two lines a copy; its ops are
    the general loop's, but for their times (which never go back), whatever the lock does:
    grants usual or not (a token, a validity of their own), acquires that fail or raise,
    releases that say not-held or raise; the run's end far (the whole timeout shown), near
    (the time left), or coming near as the sessions go."""
    ops = {}
    for stop in (threading.Event(), Stop()):
        path = tmp_path / f"{type(stop).__name__}.jsonl"
        journal = JournalWriter(path, 3, time.monotonic_ns())
        end_ns = None if end_in is None else time.monotonic_ns() + int(end_in * 1e9)
        workload = LockWorkload(MutexParams(process=3, lock_name="k", hold_min=0, hold_max=0,
                                            think_min=0, think_max=0, acquire_timeout=5.0,
                                            end_ns=end_ns, holds_seen=False),
                                _Scripted(script, stop), None, journal, stop)
        workload.run()
        journal.close()
        read = read_journal(path)
        assert path.read_bytes() == b"".join(orjson.dumps(op) + b"\n" for op in read)
        times = [op.pop("time") for op in read]
        assert times == sorted(times) and times[0] > 0
        # an op begins after the one before it ended, never at the same ns (checker.lockorder's
        # premise: else the linearizability check searches)
        assert all(t > before for before, t, op in zip(times, times[1:], read[1:], strict=False)
                   if op["type"] == "invoke"), times
        for op in read:
            if end_in is not None and op["f"] == "acquire" and op["type"] == "invoke":
                assert 0.1 <= op["value"].pop("timeout") <= end_in  # the time left, as asked
        ops[type(stop).__name__] = read
    assert ops["Stop"] == ops["Event"]
    assert len(ops["Stop"]) == 2 * len(script) + 2 * sum(isinstance(a, Grant) for a, _ in script)


def test_a_run_with_faults_writes_every_line_as_it_happens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where faults read who holds the lock from the journal (the default, ``holds_seen``),
    empty sessions go the general way: an acquire's ok is on record alone, before its release
    is invoked, never in one copy with it."""
    def paired(self: LockWorkload) -> None:
        raise AssertionError("run_paired in a run with faults")

    monkeypatch.setattr(LockWorkload, "run_paired", paired)
    stop = Stop()
    journal = JournalWriter(tmp_path / "c.jsonl", 0, 0)
    workload = LockWorkload(MutexParams(process=0, lock_name="k", hold_min=0, hold_max=0,
                                        think_min=0, think_max=0),
                            _Scripted([(USUAL, True)] * 3, stop), None, journal, stop)
    workload.run()
    journal.close()
    assert [(op["f"], op["type"]) for op in read_journal(journal.path)][:4] == [
        ("acquire", "invoke"), ("acquire", "ok"), ("release", "invoke"), ("release", "ok")]


def test_the_loop_of_empty_sessions_grows_the_journal_as_it_fills(tmp_path: Path) -> None:
    """Past the first stretch the file reserved, its lines copied whole and in order."""
    stop = Stop()
    journal = JournalWriter(tmp_path / "c.jsonl", 0, 0)
    sessions = GROWTH // 150 + 100  # four lines of more than 150 bytes each a session
    workload = LockWorkload(MutexParams(process=0, lock_name="k" * 40, hold_min=0, hold_max=0,
                                        think_min=0, think_max=0, holds_seen=False),
                            _Scripted([(USUAL, True)] * sessions, stop), None, journal, stop)
    workload.run()
    journal.close()
    ops = read_journal(journal.path)
    assert journal.path.stat().st_size > GROWTH
    assert [(op["f"], op["type"], op["value"].get("session")) for op in ops] == [
        (f, t, None if t == "invoke" and f == "acquire" else s) for s in range(1, sessions + 1)
        for f, t in (("acquire", "invoke"), ("acquire", "ok"), ("release", "invoke"),
                     ("release", "ok"))]


@pytest.mark.parametrize("torn_at", [None, 0, 1])
def test_of_two_lines_copied_at_once_a_torn_copy_keeps_those_whole_before_its_zero(
        tmp_path: Path, torn_at: int | None) -> None:
    """A copy of two lines that a SIGKILL cut short (any of its bytes still a zero of the
    space reserved, in whichever line): the lines whole before the first zero are read, none
    after it."""
    w = JournalWriter(tmp_path / "c.jsonl", 0, 0)
    both = w.line_format("ok", "acquire", "k", b'{"session":%d}', b"") + w.line_format(
        "invoke", "release", "k", b'{"session":%d}', b"")
    w.mapped_write()(both % (5, 1, 5, 1))
    w.close()
    data = bytearray((tmp_path / "c.jsonl").read_bytes())
    first = data.index(b"\n") + 1
    if torn_at is not None:
        data[first // 2 if torn_at == 0 else first + 10] = 0
    (tmp_path / "c.jsonl").write_bytes(bytes(data) + b"\0" * 4096)
    assert [(op["type"], op["f"]) for op in read_journal(tmp_path / "c.jsonl")] == [
        ("ok", "acquire"), ("invoke", "release")][:{None: 2, 0: 0, 1: 1}[torn_at]]
