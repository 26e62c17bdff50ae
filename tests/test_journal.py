"""The memory-mapped journal: nothing a killed writer recorded is lost, nothing it had not
finished is read, and what a writer that closes leaves is plain JSON lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.controller.live import JournalTail, LiveState
from harness.core.history import HistoryError
from harness.core.journal import GROWTH, JournalWriter, read_journal

REPO = Path(__file__).resolve().parents[1]
PAD = "x" * 900  # about a KiB a line: a few thousand lines cross a growth of the file

# Records op k, then says k on stdout: once k is said, op k must be read back.
WRITER = f"""
import os, sys
from harness.core.journal import JournalWriter
w = JournalWriter(sys.argv[1], 0, 0)
k = 0
while True:
    w.record("invoke", "acquire", {{"k": k, "pad": "{PAD}"}}, lock="a")
    os.write(1, b"%d\\n" % k)
    k += 1
"""

TORN = """
import os, signal, sys
from harness.core.journal import JournalWriter
w = JournalWriter(sys.argv[1], 0, 0)
for k in range(3):
    w.record("ok", "acquire", k)
m = w._map
at = m.tell()
# A line cut off mid-copy, its end (newline too) copied before its middle: zeros between.
m[at:at + 12] = b'{"time": 99,'
m[at + 40:at + 52] = b'"f":"late"}\\n'
os.kill(os.getpid(), signal.SIGKILL)
"""


def run_writer(code: str, path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                            env=env)


def test_a_writer_killed_mid_run_loses_no_completed_op(tmp_path: Path) -> None:
    path = tmp_path / "c0.jsonl"
    proc = run_writer(WRITER, path)
    assert proc.stdout is not None
    said = -1
    deadline = time.monotonic() + 60
    lines_past_growth = 2 * GROWTH // 1000
    while said < lines_past_growth and time.monotonic() < deadline:
        said = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    said = max([said, *(int(x) for x in proc.stdout.read().split())])
    assert said >= lines_past_growth, "the writer was too slow to cross a growth"
    ops = read_journal(path)
    # Every op it said it recorded is there, in order, and nothing else is: no torn line, no
    # zero of the space it had reserved.
    assert [op["value"]["k"] for op in ops] == list(range(len(ops)))
    assert len(ops) >= said + 1
    assert path.stat().st_size > sum(len(json.dumps(op)) for op in ops)  # the reserved space


def test_a_torn_line_and_the_reserved_space_are_dropped_and_a_new_writer_continues(
        tmp_path: Path) -> None:
    path = tmp_path / "c0.jsonl"
    proc = run_writer(TORN, path)
    assert proc.wait(30) == -signal.SIGKILL
    data = path.read_bytes()
    assert b'{"time": 99,' in data and b'"late"}\n' in data and data.endswith(b"\0")
    assert [op["value"] for op in read_journal(path)] == [0, 1, 2]
    tail = JournalTail(path)
    assert [op["value"] for op in tail.read_new()] == [0, 1, 2]
    assert tail.read_new() == []  # the torn line is not a line
    w = JournalWriter(path, 0, 0)  # continues after the last whole line
    w.record("ok", "acquire", 3)
    assert [op["value"] for op in tail.read_new()] == [3]
    w.close()
    lines = path.read_text().splitlines()
    assert [json.loads(x)["value"] for x in lines] == [0, 1, 2, 3]
    assert path.read_bytes().endswith(b"}\n")


def test_a_closed_journal_is_plain_json_lines_across_growths(tmp_path: Path) -> None:
    path = tmp_path / "nemesis.jsonl"
    w = JournalWriter(path, "nemesis", 0)
    n = 3 * GROWTH // 1000
    for k in range(n):
        w.record("info", "pause", {"k": k, "pad": PAD}, error="é\udcff" if k == 7 else None)
    w.close()
    w.close()  # twice is harmless
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and b"\0" not in path.read_bytes()
    ops = [json.loads(x) for x in lines[:-1]]
    assert [op["value"]["k"] for op in ops] == list(range(n))
    assert ops[7]["error"] == "é\\udcff"  # a lone surrogate is spelled, not written half
    assert read_journal(path) == ops


def test_a_line_that_is_no_json_before_the_end_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c0.jsonl"
    w = JournalWriter(path, 0, 0)
    w.record("invoke", "acquire")
    w.close()
    with path.open("ab") as fh:
        fh.write(b'{"time": 5, "proc\n{"time": 6}\n')
    with pytest.raises(HistoryError, match=r"c0.jsonl line 2: not valid JSON"):
        read_journal(path)


def test_without_following_in_flight_reads_each_journal_s_last_line(tmp_path: Path) -> None:
    writers = {p: JournalWriter(tmp_path / f"c{p}.jsonl", p, 0) for p in (0, 1, 2)}
    live = LiveState({p: w.path for p, w in writers.items()}, follow=False)
    assert live.in_flight() == []
    for k in range(500):
        writers[0].record("invoke", "acquire", k)
        writers[0].record("ok", "acquire", k)
    writers[1].record("invoke", "acquire")
    writers[2].record("invoke", "acquire")
    writers[2].record("fail", "acquire")
    assert live.in_flight() == [1]
    writers[0].record("invoke", "release")
    writers[1].record("info", "acquire")
    assert live.in_flight() == [0]
    live.forget(0)
    assert live.in_flight() == []
    assert live.ops == 0  # nothing was parsed but the last lines
    for w in writers.values():
        w.close()


def test_settle_waits_for_the_ops_in_flight_not_for_those_invoked_after(tmp_path: Path
                                                                       ) -> None:
    # client 0 is in an op at the heal, completes it 0.2 s later and goes on invoking (a busy
    # load: always some op in flight); client 1 is idle; settle returns once 0 heard back
    writers = {p: JournalWriter(tmp_path / f"c{p}.jsonl", p, 0) for p in (0, 1)}
    live = LiveState({p: w.path for p, w in writers.items()}, follow=True)
    writers[1].record("invoke", "acquire")
    writers[1].record("ok", "acquire")
    writers[0].record("invoke", "acquire")

    def busy() -> None:
        time.sleep(0.2)
        writers[0].record("ok", "acquire")
        for _ in range(200):  # bounded: 2 s at most
            writers[0].record("invoke", "release")
            time.sleep(0.005)
            writers[0].record("ok", "release")
            writers[0].record("invoke", "acquire")
            time.sleep(0.005)

    worker = threading.Thread(target=busy)
    started = time.monotonic()
    worker.start()
    assert live.settle(5.0) == []
    took = time.monotonic() - started
    worker.join()
    assert 0.2 <= took < 3.0, took  # not the 5 s: the ops invoked after are not waited for
    assert list(live.invoked()) == [0]  # its last op is in flight: it was never idle
    for w in writers.values():
        w.close()


def test_settle_names_the_clients_that_never_heard_back(tmp_path: Path) -> None:
    writers = {p: JournalWriter(tmp_path / f"c{p}.jsonl", p, 0) for p in (0, 1, 2)}
    live = LiveState({p: w.path for p, w in writers.items()}, follow=False)
    writers[0].record("invoke", "acquire")  # never completes
    writers[1].record("invoke", "acquire")
    writers[1].record("info", "acquire", error="timeout")
    writers[2].record("invoke", "write")  # gone: forgotten
    live.forget(2)
    started = time.monotonic()
    assert live.settle(0.3) == [0]
    assert 0.3 <= time.monotonic() - started < 1.0
    for w in writers.values():
        w.close()


def test_the_merged_ops_are_the_ones_history_jsonl_holds(tmp_path: Path) -> None:
    # the report and the summary read the ops the run merged and checked, not history.jsonl
    # read again: the two must be the same ops, key for key, in the same order; journals with
    # a torn tail, a killed writer's reserved zeros, text that needs escapes
    from harness.controller.store import RunDir
    from harness.core.history_file import read_history

    run = RunDir(tmp_path / "run")
    run.journals.mkdir(parents=True)
    kept = JournalWriter(run.journal(0), 0, 0)
    killed = JournalWriter(run.journal(1), 1, 0)
    nemesis = JournalWriter(run.journal("nemesis"), "nemesis", 0)
    for k in range(300):
        kept.record("invoke", "acquire", {"timeout": 5.0}, lock="lock")
        kept.record("ok", "acquire", {"session": k, "validity": 2.0}, lock="lock")
        killed.record("invoke", "write", {"seq": k, "note": "é\u2028\\\"x\""})
        killed.record("info", "write", None, error="timed out\n\t")
        if k % 100 == 0:
            nemesis.record("info", "pause", "start", targets=["c1"], detail={"n": k})
    kept.record("invoke", "release", lock="lock")  # never completed
    kept.close()
    nemesis.close()
    torn = b'{"time": 99999999999, "process": 1, "ty'  # killed mid-copy: no newline
    assert killed._map is not None
    at = killed._map.tell()
    killed._map[at:at + len(torn)] = torn
    # killed is never closed: its file ends in the zeros of the space it reserved
    assert run.journal(1).read_bytes().endswith(b"\0" * 64)
    merged = run.merge()
    again = read_history(run.history)
    assert len(merged) == 300 * 4 + 3 + 1
    assert [list(op.items()) for op in merged] == [list(op.items()) for op in again]
    killed.close()


def test_the_merge_orders_as_the_time_journal_line_sort_did(tmp_path: Path) -> None:
    # the merge sorts by time alone, stably, over the journals taken in name order: ties go
    # to the earlier journal, then the earlier line, as the (time, journal, line) sort it
    # replaced; a journal out of time order (the nemesis's lanes) is ordered too
    import random

    from harness.core.journal import merge_journals

    rng = random.Random(7)
    for name in ("c0", "c1", "c10", "c2", "final", "nemesis"):
        times = sorted(rng.randrange(0, 50) for _ in range(200))
        if name == "nemesis":
            rng.shuffle(times)
        with (tmp_path / f"{name}.jsonl").open("w") as fh:
            for k, t in enumerate(times):
                fh.write(json.dumps({"time": t, "process": name, "type": "info", "f": "x",
                                     "value": k, "index": 7}) + "\n")
    paths = list(tmp_path.glob("*.jsonl"))
    keyed = [(op["time"], j, k, op) for j, p in enumerate(sorted(paths))
             for k, op in enumerate(read_journal(p))]
    keyed.sort(key=lambda x: x[:3])
    want = [{"index": i, **{k: v for k, v in x[3].items() if k != "index"}}
            for i, x in enumerate(keyed)]
    got = merge_journals(paths)
    assert [list(op.items()) for op in got] == [list(op.items()) for op in want]
    assert len({op["time"] for op in got}) < len(got)  # ties were there to order


def test_a_line_is_what_orjson_with_its_options_writes_whichever_path_encodes_it(
        tmp_path: Path) -> None:
    """Plain orjson first, its options (keys that are no strings, ``default=str``) only where
    it refuses without them: the bytes are the same either way."""
    import orjson

    from harness.core.journal import encode

    thing = object()
    ops = [{"time": 1, "process": 0, "type": "ok", "f": "acquire", "value": {"session": 2,
                                                                             "validity": 2.5}},
           {"time": 2, "process": 0, "type": "ok", "f": "read", "value": {1: "a", 2.5: [3]}},
           {"time": 3, "process": 0, "type": "info", "f": "write", "value": thing}]
    for op in ops:
        assert encode(op) == orjson.dumps(op, option=orjson.OPT_NON_STR_KEYS, default=str)
    w = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    for op in ops:
        w.record(op["type"], op["f"], op["value"], lock="l", token=None)
    w.close()
    got = read_journal(tmp_path / "c0.jsonl")
    assert [op["value"] for op in got] == [{"session": 2, "validity": 2.5},
                                           {"1": "a", "2.5": [3]}, str(thing)]
    assert [sorted(op) for op in got] == [["f", "lock", "process", "time", "type", "value"]] * 3


def test_an_op_s_keys_come_in_one_order_and_none_is_left_out(tmp_path: Path) -> None:
    w = JournalWriter(tmp_path / "c0.jsonl", 3, 0)
    w.record("fail", "release", {"session": 1}, error="not-held", token=7, lock="l")
    w.record("invoke", "acquire", None, lock=None, token=None, error=None)
    w.close()
    lines = (tmp_path / "c0.jsonl").read_bytes().splitlines()
    assert [list(json.loads(x)) for x in lines] == [
        ["time", "process", "type", "f", "value", "lock", "token", "error"],
        ["time", "process", "type", "f", "value"]]
    assert lines[0].endswith(b',"process":3,"type":"fail","f":"release","value":{"session":1},'
                             b'"lock":"l","token":7,"error":"not-held"}')


def test_one_decoder_reads_every_journal_of_a_merge_as_each_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge reads its journals with one bulk decoder (the names of the first shared with
    the rest): the same ops as journal by journal, strictly; a journal with an f the decoder
    has not seen yet is read as well, and a bad line is refused with the strict reader's
    words and line."""
    from harness.core import journal

    def write(p: int, fs: tuple[str, ...], bad: int | None = None) -> None:
        ops = [{"time": 5 * i + p, "process": p, "type": ("invoke", "ok")[i % 2],
                "f": fs[(i // 2) % len(fs)], "value": {"session": i}, "lock": "lock"}
               for i in range(4000)]
        lines = [json.dumps(op, separators=(",", ":")) for op in ops]
        if bad is not None:
            lines[bad] = lines[bad].replace('"ok"', '"okay"')
        (tmp_path / f"c{p}.jsonl").write_text("\n".join(lines) + "\n")

    write(0, ("acquire", "release"))
    write(1, ("acquire", "extend", "release"))  # a name the first journal did not have
    write(2, ("acquire", "release"))
    paths = sorted(tmp_path.glob("*.jsonl"))
    assert len(paths[0].read_bytes()) >= journal.BULK_BYTES  # read in bulk
    merged = journal.merge_journals(paths)
    monkeypatch.setattr(journal, "BULK_BYTES", 1 << 62)  # strictly, one journal at a time
    assert merged == journal.merge_journals(paths)
    assert len(merged) == 12000 and [op["index"] for op in merged] == list(range(12000))
    assert {op["f"] for op in merged} == {"acquire", "extend", "release"}
    write(2, ("acquire", "release"), bad=2501)
    with pytest.raises(HistoryError) as strict:
        journal.merge_journals(paths)
    monkeypatch.setattr(journal, "BULK_BYTES", 0)
    with pytest.raises(HistoryError) as bulk:
        journal.merge_journals(paths)
    assert str(bulk.value) == str(strict.value)
    assert "c2.jsonl line 2502" in str(bulk.value) and "okay" in str(bulk.value)


def test_the_live_overlap_count_is_the_checkers_even_when_a_journal_is_read_late(
        tmp_path: Path) -> None:
    """The progress line's "overlaps so far": process 0's release is read after process 1's
    grant that came after it (its journal is read late) and is no overlap; process 1 then
    acquires anew without releasing (letting go silently), process 0 holds to the end while
    2 is granted: the count the live state ends with is the mutex checker's."""
    from checker.mutex import MutexChecker

    paths = {p: tmp_path / f"c{p}.jsonl" for p in (0, 1, 2)}
    live = LiveState(paths, follow=True)
    ops: list[dict[str, object]] = []

    def write(p: int, t: float, type_: str, f: str) -> None:
        op = {"time": int(t * 1e9), "process": p, "type": type_, "f": f, "lock": "lock"}
        ops.append(op)
        with paths[p].open("ab") as fh:
            fh.write(json.dumps(op).encode() + b"\n")

    write(0, 1.0, "invoke", "acquire")
    write(0, 2.0, "ok", "acquire")
    assert live.holders() == [0]
    write(1, 3.0, "invoke", "acquire")
    write(1, 5.0, "ok", "acquire")
    assert live.holders() == [0, 1] and live.overlaps == 1  # as far as it has read
    write(0, 4.0, "invoke", "release")  # written before 1's grant, read after it
    write(0, 4.1, "ok", "release")
    assert live.holders() == [1] and live.overlaps == 0
    write(0, 6.0, "invoke", "acquire")
    write(0, 6.5, "ok", "acquire")  # 1 still holds: one overlap
    write(1, 7.0, "invoke", "acquire")  # 1 lets go silently
    write(1, 7.5, "fail", "acquire")
    write(2, 8.0, "invoke", "acquire")
    write(2, 8.5, "ok", "acquire")  # 0 still holds: a second one
    live.holders()
    history = [{"index": i, **op} for i, op in enumerate(sorted(ops, key=lambda o: o["time"]))]
    assert live.overlaps == MutexChecker.check(history)["lock-overlap-count"] == 2


def test_live_writes_tell_a_holder_in_a_write_from_one_between_two(tmp_path: Path) -> None:
    """What a pause of the holder aims at: a write of the hold in flight, or done and the next
    not begun; a write outside a hold, or of a hold that ended, is nobody's."""
    w = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    live = LiveState({0: w.path}, follow=True)
    w.record("invoke", "write", {"kind": "stray"})
    w.record("ok", "write", {"kind": "stray"})
    w.record("invoke", "acquire")
    w.record("ok", "acquire")
    assert live.writes() == {}  # holds, has written nothing yet
    w.record("invoke", "write", {"kind": "enter"})
    assert live.writes() == {0: True}
    w.record("ok", "write", {"kind": "enter"})
    assert live.writes() == {0: False}
    w.record("invoke", "write", {"kind": "exit"})
    w.record("info", "write", {"kind": "exit"})  # timed out: it is no longer in it
    assert live.writes() == {0: False}
    w.record("invoke", "release")
    assert live.writes() == {}
    w.record("ok", "release")
    w.record("invoke", "acquire")
    w.record("ok", "acquire")
    assert live.writes() == {}  # a new hold: its writes are still to come
    w.record("invoke", "write", {"kind": "enter"})
    live.forget(0)
    assert live.writes() == {}
    w.close()


def test_live_writes_put_a_holder_that_has_read_between_its_resource_ops(tmp_path: Path
                                                                         ) -> None:
    """The counter's hold is read, then a write computed from it: the pause aims between the
    two (the lost update), so a read answered in a hold counts as a resource op done; one
    outside a hold, or one that failed, does not."""
    w = JournalWriter(tmp_path / "c0.jsonl", 0, 0)
    live = LiveState({0: w.path}, follow=True)
    w.record("invoke", "read", {})
    w.record("ok", "read", {"counter": 1})
    w.record("invoke", "acquire")
    w.record("ok", "acquire")
    w.record("invoke", "read", {})
    assert live.writes() == {}  # a read in flight is not a write in flight
    w.record("fail", "read", {})
    assert live.writes() == {}  # nothing read: its write has nothing to be computed from
    w.record("invoke", "read", {})
    w.record("ok", "read", {"counter": 1})
    assert live.writes() == {0: False}
    w.record("invoke", "write", {"kind": "increment"})
    assert live.writes() == {0: True}
    w.record("ok", "write", {"kind": "increment"})
    w.record("invoke", "release")
    assert live.writes() == {}
    w.close()


def test_live_now_counts_as_the_journals_do(tmp_path: Path) -> None:
    t0 = time.monotonic_ns() - 2_000_000_000  # the run began 2 s ago
    w = JournalWriter(tmp_path / "c0.jsonl", 0, t0)
    live = LiveState({0: w.path}, t0_ns=t0)
    w.record("invoke", "acquire")
    w.record("ok", "acquire")
    since = live.holds()[0]
    now = live.now()
    assert now is not None and 2.0 <= since <= now < 3.0
    assert LiveState({0: w.path}).now() is None
    w.close()
