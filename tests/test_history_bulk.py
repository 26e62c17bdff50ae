"""The bulk reader of large JSONL histories reads exactly what the strict one reads: the same
ops, fields in the same order, and the same refusal, naming the same line, for anything else."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import history_bulk, history_file
from harness.core.history import HistoryError, parse_lines
from harness.core.history_file import read_history
from tests.test_history import op_like


def strict(data: bytes) -> list[dict[str, Any]] | str:
    """What the line-by-line reader makes of ``data``: its ops, or its error."""
    try:
        return parse_lines(history_file._bounded_lines(io.BytesIO(data)), "h")
    except HistoryError as e:
        return str(e)


def bulk(data: bytes, block: int) -> list[dict[str, Any]] | str:
    old = history_bulk.BLOCK
    history_bulk.BLOCK = block
    try:
        return history_bulk.read_blocks(io.BytesIO(data), "h")
    except HistoryError as e:
        return str(e)
    finally:
        history_bulk.BLOCK = old


def same(a: list[dict[str, Any]] | str, b: list[dict[str, Any]] | str) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, str):
        assert a == b
        return
    assert isinstance(b, list)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert json.dumps(x) == json.dumps(y)  # values and the order of the fields


def good(i: int, **kw: Any) -> dict[str, Any]:
    op = {"index": i, "time": 1000 * i, "process": i % 3, "type": "invoke", "f": "acquire",
          "value": None, "lock": "lock"}
    op.update(kw)
    return op


def compact(op: dict[str, Any]) -> bytes:
    return json.dumps(op, separators=(",", ":")).encode()


_odd_lines = st.sampled_from([
    b"", b"   ", b"\r", b'{"time":1}', b"[1, 2]", b'{"time": 2, "process": 0, "ty', b"\xff\xfe",
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x","value":NaN}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x","value":"\\ud800"}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x","value":1e400}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x","time":2}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x","value":{"a":1,"a":2}}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"a:b","lock":"c:d"}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x"} {"time":1}',
    b'{"index":0,"time":1,"process":0,"type":"ok","f":"x",',
    b'"value":null}',
])


@st.composite
def history_bytes(draw: st.DrawFn) -> bytes:
    """Mostly good compact ops in time order (the bulk path's case), some ops made odd by a
    field, some printed with spaces, some raw odd lines; a line may end in CRLF."""
    lines: list[bytes] = []
    t = 0
    for i in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 9))
        t += draw(st.integers(0, 3))
        if kind <= 5:
            line = compact(good(i, time=t, f=draw(st.sampled_from(["acquire", "release", "r"])),
                                lock=draw(st.sampled_from(["lock", "k:1", "k2"])),
                                value=draw(st.one_of(st.none(), st.just({"session": 1,
                                                                         "validity": 2.5})))))
        elif kind == 6:
            obj = draw(op_like())
            if "time" in obj and type(obj["time"]) is int and draw(st.booleans()):
                obj["time"] = t
            line = compact(obj) if draw(st.booleans()) else json.dumps(obj).encode()
        elif kind == 7:
            line = json.dumps(good(i, time=t)).encode()  # with spaces
        elif kind == 8:
            line = draw(_odd_lines)
        else:
            line = compact(good(i, time=max(0, t - draw(st.integers(0, 5)))))
        lines.append(line + (b"\r\n" if draw(st.integers(0, 20)) == 0 else b"\n"))
    data = b"".join(lines)
    if data and draw(st.booleans()):
        data = data[:-1]  # no newline after the last line
    return data


@settings(max_examples=300, deadline=None)
@given(history_bytes(), st.integers(1, 400))
def test_the_bulk_reader_reads_what_the_strict_one_reads(data: bytes, block: int) -> None:
    same(bulk(data, block), strict(data))


def test_a_large_clean_file_is_read_in_bulk_as_the_strict_reader_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through read_history, over the size from which it reads in blocks; the odd lines (a
    nemesis op, a list value, a colon inside a string, a field the schema does not name) are
    read strictly between bulk-decoded ones; the f and lock names are one object each."""
    ops = [good(i, time=10 * i, process=i // 2, type=("invoke", "ok")[i % 2],
                f=("acquire", "release")[i // 2 % 2]) for i in range(3000)]
    for i in (10, 11):
        ops[i] = {"index": i, "time": 10 * i, "process": "nemesis", "type": "info",
                  "f": "pause", "value": None, "targets": ["n1"]}
    ops[500]["value"] = [{"a": 1}]
    ops[501]["error"] = "refused: not the holder"
    ops[502]["extra"] = {"b": [1, 2]}
    ops[2998]["f"] = ops[2999]["f"] = "read"
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(compact(op) + b"\n" for op in ops))
    monkeypatch.setattr(history_bulk, "BLOCK", 4096)
    monkeypatch.setattr(history_file, "BULK_BYTES", 0)
    got = read_history(path)
    same(got, ops)
    assert got[1]["f"] is got[2001]["f"] and got[5]["lock"] is got[2001]["lock"]


def test_a_refusal_in_a_large_file_names_its_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_bulk, "BLOCK", 4096)
    monkeypatch.setattr(history_file, "BULK_BYTES", 0)
    lines = [compact(good(i)) for i in range(2000)]
    cases = {
        1234: (b'{"index":1234,"time":1234000,"process":1,"type":"ok","f":"acquire",'
               b'"value":{"seq":"one"},"lock":"lock"}',
               "line 1235: value field 'seq' must be an integer, got 'one'"),
        1500: (compact(good(1500, time=5)), "line 1501: time 5 goes backwards"),
        1700: (compact(good(1700))[:-1] + b',"time":1700000}',
               "line 1701: malformed history: duplicate key 'time' in an object"),
    }
    for at, (line, message) in cases.items():
        bad = [*lines[:at], line, *lines[at + 1:]]
        path = tmp_path / "history.jsonl"
        path.write_bytes(b"\n".join(bad) + b"\n")
        with pytest.raises(HistoryError, match=message):
            read_history(path)


@settings(max_examples=150, deadline=None)
@given(history_bytes())
def test_a_journal_read_in_bulk_reads_as_it_did(data: bytes) -> None:
    """A journal (its ops in their order, not by time; bytes that are not UTF-8 replaced) from
    the bulk decoder (the journal as one block) or, where it declines, the strict reader, as
    the strict reader reads it."""
    import tempfile

    from harness.core import journal

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c0.jsonl"
        path.write_bytes(data)

        def read(bulk_bytes: int) -> list[dict[str, Any]] | str:
            old = journal.BULK_BYTES
            journal.BULK_BYTES = bulk_bytes
            try:
                return journal.read_journal(path)
            except HistoryError as e:
                return str(e)
            finally:
                journal.BULK_BYTES = old

        same(read(0), read(1 << 62))


def test_journals_decoded_in_bulk_merge_as_before(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.core import journal

    for p in range(3):
        ops = [{"time": 7 * i + p, "process": p, "type": ("invoke", "ok")[i % 2],
                "f": "acquire", "value": {"timeout": 1.5} if i % 2 == 0 else {"session": i},
                "lock": "lock"} for i in range(600)]
        ops[5]["error"] = "ConnectionError: refused"  # a colon inside a string
        lines = [compact(op) for op in ops]
        if p == 0:
            lines[7] = lines[7][:-1] + b',"note":"caf\xff"}'  # not UTF-8: replaced, as before
        (tmp_path / f"c{p}.jsonl").write_bytes(b"\n".join(lines) + b'\n{"time": 99, "pro')
    (tmp_path / "nemesis.jsonl").write_bytes(compact(
        {"time": 3, "process": "nemesis", "type": "info", "f": "pause", "value": None,
         "targets": ["n1"]}) + b"\n")
    paths = sorted(tmp_path.glob("*.jsonl"))
    monkeypatch.setattr(journal, "BULK_BYTES", 1 << 62)
    before = journal.merge_journals(paths)
    monkeypatch.setattr(journal, "BULK_BYTES", 0)
    monkeypatch.setattr(history_bulk, "BLOCK", 2048)
    after = journal.merge_journals(paths)
    same(after, before)
    for p, declined in ((0, True), (1, False)):
        with (tmp_path / f"c{p}.jsonl").open("rb") as fh:
            data = journal.read_lines(fh)[0]
        assert (history_bulk.bulk(data, "c", 1, history_bulk.new_decoder()) is None) is declined
    assert len(after) == 1801 and after[0]["time"] == 0 and after[-1]["index"] == 1800
