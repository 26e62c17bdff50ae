"""The journals merged into columns a journal at a time are the dict merge put in columns: the
same ops (key for key, in order, of the same types), the same ops in columns and as dicts, the
same refusal of a malformed journal, None where the dict merge's columns are None."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.history import HistoryError
from harness.core.journal import JournalWriter, encode, merge_journals
from harness.core.journal_columns import merge_journals_columns, read_columns
from harness.core.run_history import ColumnHistory, columns_of, merged_columns

# Numbers of every width and form the layouts read: negative, past 18 digits, floats with a
# point or an exponent (orjson writes 1e-07 as 1e-7), -0.0, out of a typed field's range.
INTS = st.one_of(st.integers(-3, 12), st.integers(-2**63, 2**63 - 1), st.just(10**18),
                 st.just(-(10**19)))
FLOATS = st.one_of(st.sampled_from([0.0, -0.0, 2.0, 5.0, 1e-7, 2.5e16, 1e13, -1.5]),
                   st.floats(allow_nan=False, allow_infinity=False))
TEXTS = st.one_of(st.sampled_from(["", "lock", "lock7", "timed out after 10 s", "é\u2028\"x",
                                   "\\", "a\nb"]), st.text(max_size=4))
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXTS)
VALUE_KEYS = st.sampled_from(["session", "validity", "timeout", "seq", "kind", "error", "x"])
TYPED = st.fixed_dictionaries({}, optional={
    "session": st.one_of(st.none(), st.integers(-5, 10**6)), "validity": st.one_of(
        st.sampled_from([2.0, 2.5, 0.0, 1e-7, 7, None]), FLOATS, INTS),
    "timeout": SCALARS, "kind": st.one_of(st.none(), TEXTS), "seq": INTS, "error": SCALARS})
VALUES = st.one_of(st.none(), TYPED, TYPED.flatmap(lambda v: st.permutations(list(v.items()))
                                                  .map(dict)),
                   st.dictionaries(VALUE_KEYS, SCALARS, max_size=3),  # (mostly refused)
                   st.sampled_from([[1], {"state": {}}, 7, "start"]))
NAMES = st.sampled_from(["acquire", "release", "read7", "lock", "l10ck"] * 4 + [""])  # ("": bad)
TYPES = st.sampled_from(["invoke", "ok", "fail", "info"] * 5 + ["okay"])


def varied(value: Any) -> Any:
    """``value`` with its numbers drawn again (of the same kinds): its layout's other ops."""
    if type(value) is not dict:
        return st.just(value)
    new = {k: st.integers(-10**6, 10**6) if type(v) is int else
           st.floats(-1e6, 1e6) if type(v) is float else st.just(v) for k, v in value.items()}
    return st.fixed_dictionaries(new)


@st.composite
def client_ops(draw: Any, process: int) -> list[dict[str, Any]]:
    """One client's ops as a journal writer records them (the keys in its order), mostly of a
    few layouts, now and then a field of another kind or a value no column holds."""
    ops = []
    t = draw(st.integers(0, 3))
    simple = draw(st.booleans())  # the lock workload's few layouts only
    pool = draw(st.lists(VALUES, min_size=1, max_size=3))  # a client's few kinds of value
    for k in range(draw(st.integers(0, 12))):
        t += draw(st.integers(0, 2))
        op: dict[str, Any] = {"time": t, "process": process,
                              "type": ("invoke", "ok")[k % 2] if simple else
                              draw(TYPES),
                              "f": "acquire" if simple else draw(NAMES)}
        op["value"] = ({"session": draw(st.integers(0, 10**6)), "validity": 2.0} if simple
                       else draw(st.one_of(VALUES, st.sampled_from(pool).flatmap(varied))))
        if simple or draw(st.booleans()):
            op["lock"] = "lock" if simple else draw(st.one_of(st.none(), NAMES))
        if not simple and draw(st.integers(0, 3)) == 0:
            op["token"] = draw(st.one_of(st.none(), st.integers(0, 99), INTS))
        if not simple and draw(st.integers(0, 3)) == 0:
            op["error"] = draw(SCALARS)
        ops.append(op)
    return ops


@st.composite
def journal_dirs(draw: Any) -> dict[str, bytes]:
    """A run's journals: clients' (some written by hand: spaced, with a leading zero, a line
    torn by a killed writer and its zeros, a process's second journal), the nemesis's, the
    final read's, an empty one."""
    files: dict[str, bytes] = {}
    clients = draw(st.integers(0, 3))
    for p in range(clients):
        lines = [encode(op) for op in draw(client_ops(p))]
        how = draw(st.sampled_from(["plain"] * 12 + ["spaced", "zero", "torn", "again"]))
        if lines and how == "spaced":
            lines[-1] = json.dumps(orjson.loads(lines[-1])).encode()
        elif lines and how == "zero":
            lines[0] = lines[0].replace(b'"time":', b'"time":0', 1)
        tail = b'{"time":9,"process":' if how == "torn" else b""
        files[f"c{p}.jsonl"] = b"".join(x + b"\n" for x in lines) + tail + \
            (b"\0" * 64 if how == "torn" else b"")
        if how == "again":
            files[f"c{p}b.jsonl"] = b"".join(encode(op) + b"\n"
                                             for op in draw(client_ops(p)))
    if draw(st.booleans()):
        files["nemesis.jsonl"] = b"".join(
            orjson.dumps({"time": t, "process": "nemesis", "type": "info", "f": "pause",
                          "value": v}) + b"\n"
            for t, v in draw(st.lists(st.tuples(st.integers(0, 20),
                                                st.sampled_from(["start", ["c1"], None])),
                                      max_size=3)))
    if draw(st.booleans()):
        files["final.jsonl"] = (
            orjson.dumps({"time": 30, "process": clients, "type": "invoke", "f": "read",
                          "value": None}) + b"\n"
            + orjson.dumps({"time": 31, "process": clients, "type": "ok", "f": "read",
                            "value": draw(st.sampled_from([[], {"state": {}}, None]))}) + b"\n")
    if draw(st.booleans()):
        files["empty.jsonl"] = b""
    return files


def outcome(merge: Any, paths: list[Path]) -> Any:
    """What a merge gives: its ops' bytes, which are in columns and which are dicts; or its
    refusal's words."""
    try:
        h = merge(paths)
    except HistoryError as e:
        return ("refused", str(e))
    if h is None:
        return None
    assert isinstance(h, ColumnHistory)
    return ([orjson.dumps(op) for op in h], h.clients.index.tolist(),
            [op["index"] for op in h.others], [orjson.dumps(h[i]) for i in range(len(h))])


def merged_then_columns(paths: list[Path]) -> ColumnHistory | None:
    return merged_columns(merge_journals(paths))


def same_merge(files: dict[str, bytes]) -> Any:
    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            (Path(d) / name).write_bytes(data)
        paths = list(Path(d).glob("*.jsonl"))
        want = outcome(merged_then_columns, paths)
        assert outcome(merge_journals_columns, paths) == want
        return want


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(journal_dirs())
def test_the_merge_in_columns_is_the_dict_merge_in_columns(files: dict[str, bytes]) -> None:
    same_merge(files)


def test_a_run_s_journals_merge_into_columns_as_dicts_do(tmp_path: Path) -> None:
    """Journals as the writers leave them: a killed writer's torn line and zeros, the nemesis's
    ops, the final read's list, an empty journal, equal times in two journals, a client large
    enough for the bulk decoder; its ops in columns, the others dicts, in place."""
    d = tmp_path / "journals"
    d.mkdir()
    big = JournalWriter(d / "c0.jsonl", 0, 0)
    killed = JournalWriter(d / "c1.jsonl", 1, 0)
    nemesis = JournalWriter(d / "nemesis.jsonl", "nemesis", 0)
    final = JournalWriter(d / "final.jsonl", 2, 0)
    JournalWriter(d / "c3.jsonl", 3, 0).close()  # a client that recorded nothing
    for k in range(2500):
        at = 10 * k
        big.put_at(at, big.line_format("invoke", "acquire", "lock", b'{"timeout":5.0}'), b"")
        big.put_at(at + 5, big.line_format("ok", "acquire", "lock",
                                           b'{"session":%d,"validity":2.0}', b""), k)
        if k < 40:
            killed.put_at(at + 5, killed.line_format("invoke", "release", "lock",
                                                     b'{"session":%d}', b""), k)
            killed.put_at(at + 7, killed.line_format("fail", "release", "lock",
                                                     b'{"session":%d}', b',"error":"gone 7"'),
                          k)
        if k % 500 == 0:
            nemesis.record("info", "pause", "start", targets=["c1"], detail={"n": k})
    final.record("invoke", "read", None)
    final.record("ok", "read", [])
    for w in (big, nemesis, final):
        w.close()
    assert killed._map is not None
    at = killed._map.tell()
    killed._map[at:at + 20] = b'{"time":99,"process"'  # killed mid-copy, never closed
    paths = list(d.glob("*.jsonl"))
    got = merge_journals_columns(paths)
    want = merged_then_columns(paths)
    assert got is not None and want is not None
    assert [orjson.dumps(op) for op in got] == [orjson.dumps(op) for op in want]
    assert len(got.clients) == 5000 + 80 and len(got.others) == 5 + 2
    assert set(got.clients.process.tolist()) == {0, 1}
    assert {op["process"] for op in got.others} == {"nemesis", 2}
    times = got.times()
    assert bool(np.all(times[1:] >= times[:-1]))
    killed.close()


def test_fields_no_one_column_holds_give_none_as_the_dict_merge_s_columns(
        tmp_path: Path) -> None:
    # an int in one client's journal, a float under the same name in another's: no column
    # holds both, and columns_of of them all is None; so is the merge
    def op(t: int, p: int, v: Any) -> bytes:
        return orjson.dumps({"time": t, "process": p, "type": "invoke", "f": "acquire",
                             "value": {"timeout": v}}) + b"\n"

    (tmp_path / "c0.jsonl").write_bytes(op(1, 0, 5))
    (tmp_path / "c1.jsonl").write_bytes(op(1, 1, 5.0))
    paths = list(tmp_path.glob("*.jsonl"))
    assert merged_then_columns(paths) is None
    assert merge_journals_columns(paths) is None
    # one layout with a field of two kinds (a string in one journal, an int in the other)
    (tmp_path / "c1.jsonl").write_bytes(op(1, 1, "5"))
    assert merged_then_columns(paths) is None
    assert merge_journals_columns(paths) is None
    # nothing fits: no columns
    (tmp_path / "c0.jsonl").write_bytes(op(1, 0, [5]))
    (tmp_path / "c1.jsonl").unlink()
    assert merged_then_columns([tmp_path / "c0.jsonl"]) is None
    assert merge_journals_columns([tmp_path / "c0.jsonl"]) is None


def test_a_malformed_journal_is_refused_with_the_dict_merge_s_words(tmp_path: Path) -> None:
    good = {"time": 1, "process": 0, "type": "ok", "f": "acquire", "value": {"session": 1}}
    for bad in (b'{"time":01,"process":0,"type":"ok","f":"acquire","value":{"session":1}}',
                b'{"time":1,"process":0,"type":"ok","f":"acquire","value":{"session":01}}',
                b'{"time":1,"process":0,"type":"ok","f":"acquire","value":{"session":-01}}',
                orjson.dumps({**good, "type": "okay"}),
                orjson.dumps({**good, "value": {"session": 1.5}}),
                orjson.dumps({**good, "value": {"validity": 1e13}}),
                orjson.dumps({**good, "time": -1}),
                orjson.dumps({**good, "f": ""})):
        # (a layout's first line is good: what is wrong in a later one is found all the same)
        lines = [orjson.dumps({**good, "value": {"session": s}}) for s in (10, 99, -10, -99)]
        (tmp_path / "c0.jsonl").write_bytes(b"\n".join([*lines, bad, *lines]) + b"\n")
        paths = [tmp_path / "c0.jsonl"]
        with pytest.raises(HistoryError) as want:
            merge_journals(paths)
        with pytest.raises(HistoryError) as got:
            merge_journals_columns(paths)
        assert str(got.value) == str(want.value)


def test_a_journal_s_lines_read_into_columns_are_its_ops_in_columns() -> None:
    ops = [{"time": 10**17 + t, "process": -4, "type": "ok", "f": "a1", "value": v,
            "lock": lock, "error": e}
           for t, (v, lock, e) in enumerate([({"validity": -2.5e-7, "kind": "x9"}, "l1", 1),
                                             ({"validity": 3.0, "kind": "x0"}, "l2", 22),
                                             ({"validity": 3.0, "kind": "x"}, None, -3)])]
    data = b"".join(orjson.dumps(op) + b"\n" for op in ops)
    got = read_columns(data)
    want = columns_of(ops, indexed=False)
    assert got is not None and want is not None
    assert [orjson.dumps(got.op(i)) for i in range(3)] == \
        [orjson.dumps(want.op(i)) for i in range(3)]
    assert [orjson.dumps(got.op(i)) for i in range(3)] == \
        [orjson.dumps({"index": 0, **op}) for op in ops]
    # what the layouts do not read is left to the dicts
    assert read_columns(data.replace(b'"x9"', b'"\\u0078"')) is None  # an escape
    assert read_columns(data.replace(b'"error":1', b'"error": 1')) is None  # a space
    assert read_columns(data.replace(b'"error":22', b'"error":22,"error":2')) is None
    assert read_columns(b"") is None


def test_what_columns_of_refuses_a_key_named_as_a_value_s_column() -> None:
    op = {"index": 0, "time": 1, "process": 0, "type": "ok", "f": "a", "value": {"x": 1},
          "value.x": 2}
    assert columns_of([op]) is None
    assert columns_of([{k: v for k, v in op.items() if k != "value.x"}]) is not None


def test_a_field_null_in_one_layout_and_a_float_in_another_keeps_its_floats(
        tmp_path: Path) -> None:
    # a null is held by no column: the layout read first (null) must not make the column of
    # the field an int's, which would cut the later layout's floats (one layout's field is of
    # one kind, or columns_of refuses it: the null and the float are in two layouts here)
    null = {"value": {"validity": None}, "error": None}
    ops = [{"time": t, "process": 0, "type": "ok", "f": "acquire",
            **(null if t % 2 == 0 else {"value": {"session": t, "validity": 2.5 + t},
                                        "token": 1, "error": -1.5 * t})}
           for t in range(4)]
    got = same_merge({"c0.jsonl": b"".join(orjson.dumps(op) + b"\n" for op in ops)})
    assert got is not None and got[0] == [orjson.dumps({"index": i, **op})
                                          for i, op in enumerate(ops)]


def test_a_run_s_merged_history_is_columns_when_its_clients_fit_else_shared_dicts(
        tmp_path: Path) -> None:
    from harness.controller.store import RunDir
    from harness.core.checks import TIME_ORDERED, Shared
    from harness.core.history_file import read_history

    run = RunDir(tmp_path)
    run.journals.mkdir()
    w = JournalWriter(run.journal(0), 0, 0)
    w.record("invoke", "acquire", {"timeout": 5.0}, lock="lock")
    w.record("ok", "acquire", {"session": 1, "validity": 2.0}, lock="lock")
    w.close()
    merged = run.merged()
    assert isinstance(merged, ColumnHistory) and merged.derived[TIME_ORDERED] is True
    run.save_history(merged)
    assert [dict(op) for op in read_history(run.history)] == list(merged)
    w = JournalWriter(run.journal(0), 0, 0)  # (continued) a value no column holds
    w.record("invoke", "read", None)
    w.record("ok", "read", [1, 2])
    w.close()
    merged = run.merged()
    assert type(merged) is Shared and merged.derived[TIME_ORDERED] is True
    assert [op["value"] for op in merged][-1] == [1, 2]
