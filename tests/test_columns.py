"""A history in columns (harness.core.columns; read by harness.core.history_bulk.read_columns,
paired by checker.calls.Paired, a lock's part decided over arrays by
checker.lockorder_rows.check_rows) against the same file read as dicts and checked as always: the
same ops, the same refusal, the same verdict, counts and witness, on valid, invalid and
malformed histories, in one block or many, written with spaces (``json.dumps``) or without
(orjson), plain or not (then the columns are refused and the file is read as dicts)."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.core.history_bulk as bulk
from checker import lockorder
from checker.linearizable import check
from harness.core.history import HistoryError
from harness.core.history_file import read_columns, read_history
from tests.test_linearizable import (
    Picker,
    generated_service,
    load_bench,
    mutate,
    random_ops,
    simulated_ops,
)

Op = dict[str, Any]
LOCK_MODELS = ("mutex", "fenced-mutex")
ROOT = Path(__file__).resolve().parents[1]
ROWS = 2000  # ops of a history whose rows are each compared with the op


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockorder, "STRICT", True)


def write(path: Path, history: list[Op], spaced: bool) -> None:
    dump = (lambda op: json.dumps(op).encode()) if spaced else orjson.dumps
    path.write_bytes(b"".join(dump(op) + b"\n" for op in history))


def agree(path: Path, block: int, monkeypatch: pytest.MonkeyPatch, *, plain: bool | None = None
          ) -> Any:
    """Read ``path`` both ways (blocks of ``block`` bytes), and check it both ways when it
    reads: everything the same. ``plain``: whether the columns must read it."""
    monkeypatch.setattr(bulk, "BLOCK", block)
    try:
        ops: list[Op] | None = read_history(path)
    except HistoryError:
        ops = None
    cols = read_columns(path, smallest=0)
    if plain is not None:
        assert (cols is not None) is plain
    if cols is None:
        return None
    assert ops is not None, "the columns read what the strict reader refuses"
    assert cols.ops() == ops
    keys = ("index", "time", "process", "type", "f", "value", "lock", "error")
    for i, op in enumerate(ops[:ROWS]):  # op i made alone, and read a field at a time: the same
        row = cols.row(i)
        assert cols.op(i) == op and row == op and dict(row) == op
        assert [row.get(k, "-") for k in keys] == [op.get(k, "-") for k in keys]
    for model in LOCK_MODELS:
        assert check(cols, model) == check(ops, model), model
    return cols


def plain(history: list[Op], rnd: random.Random) -> list[Op]:
    """The client ops of ``history`` in the plain shape the columns hold (value null; no
    token, no error), some with no index, some locks absent or null or another name."""
    locks = rnd.choice([["lock"], ["lock", "b"], [None], ["lock", None]])
    index = rnd.random() < 0.8
    out = []
    for i, op in enumerate(o for o in history if type(o["process"]) is int):
        new: Op = {"index": i} if index or rnd.random() < 0.5 else {}
        new.update(time=op["time"], process=op["process"], type=op["type"], f=op["f"],
                   value=None)
        lock = locks[op["process"] % len(locks)]
        if lock is not None or rnd.random() < 0.5:
            new["lock"] = lock
        out.append(new)
    return out


def test_generated_lock_services_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """The benchmark's simulated lock service (crashes, timeouts, unknown outcomes), valid and
    with a grant inside another's section: read and decided the same, mostly over arrays."""
    rnd = random.Random(11)
    decided = {True: 0, False: 0}
    by_layout = []  # blocks the exact-layout reader read (not msgspec): it must have read some
    layout_read = bulk._Template.read

    def counted(self: Any, block: bytes, n: int) -> Any:
        got = layout_read(self, block, n)
        by_layout.extend([n] if got is not None else [])
        return got

    monkeypatch.setattr(bulk._Template, "read", counted)
    for i in range(40):
        h = generated_service(rnd, 600, 8, invalid=bool(i % 2))
        path = tmp_path / f"h{i}.jsonl"
        write(path, h, spaced=i % 3 != 0)
        cols = agree(path, rnd.choice([64, 700, 4 << 20]), monkeypatch, plain=True)
        decided[check(cols, "mutex")["valid"] is True] += 1
    assert min(decided.values()) >= 5
    assert len(by_layout) >= 10, by_layout


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    pick = Picker(draw=draw)
    name = LOCK_MODELS[pick.int(0, 1)]
    h = (simulated_ops if pick.int(0, 2) else random_ops)(name, pick)
    rnd = random.Random(pick.int(0, 2**31))
    if pick.int(0, 1):
        h = mutate(h, rnd)
    return plain(h, rnd)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(h=histories(), spaced=st.booleans(), block=st.sampled_from([1, 90, 333, 4 << 20]),
       spoil=st.integers(0, 9), where=st.integers(0, 10**6))
def test_any_plain_history_agrees(h: list[Op], spaced: bool, block: int, spoil: int,
                                  where: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                  ) -> None:
    """Lock histories of any shape (overlaps, ties, unknown outcomes, changed completions),
    some spoilt: an op's type or f or lock changed, an index repeated, a time earlier, a field
    added, a value, a name with a digit or a quote, a negative process: the columns read and
    decide what the dicts do, or refuse and leave it to them."""
    if h and spoil:
        op = h[where % len(h)]
        if spoil == 1:
            op["type"] = ["invoke", "ok", "fail", "info"][where % 4]
        elif spoil == 2:
            op["f"] = "release" if op["f"] == "acquire" else "acquire"
        elif spoil == 3:
            op["lock"] = "other"
        elif spoil == 4:
            op["index"] = 0
        elif spoil == 5:
            op["time"] = max(0, op["time"] - 10**9)
        elif spoil == 6:
            op["error"] = "not-held"
        elif spoil == 7:
            op["value"] = 1
        elif spoil == 8:
            op["lock"] = 'l"7'
        else:
            op["process"] = -1 - op["process"]
    path = tmp_path / "h.jsonl"
    write(path, h, spaced)
    agree(path, block, monkeypatch)


def test_a_big_file_is_checked_in_columns_with_the_same_words(tmp_path: Path) -> None:
    """``harness check`` of a file past the size read in columns prints what it prints for
    the same ops read as dicts (the same file with one op that is not plain: a token)."""
    bench = load_bench()
    h = bench.inject_violation(bench.mutex_history(30_000, 6, 4))
    columns, dicts = tmp_path / "c.jsonl", tmp_path / "d.jsonl"
    write(columns, h, spaced=True)
    h[0] = {**h[0], "token": None}  # not plain: the whole file read as dicts
    write(dicts, h, spaced=True)
    assert columns.stat().st_size >= 4 << 20
    assert read_columns(columns) is not None and read_columns(dicts) is None  # the two paths
    outs = []
    for path in (columns, dicts):
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(path)],
                              capture_output=True, text=True, cwd=ROOT, check=False)
        assert proc.returncode == 1, proc.stderr
        outs.append(proc.stdout.replace(str(path), "PATH"))
    assert outs[0] == outs[1]
    assert "INVALID  PATH as mutex" in outs[0] and "had not released" in outs[0]


def test_columns_sized_from_the_first_block_grow_when_it_misleads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns are sized for the file from its first block's bytes an op: a file whose
    first ops are long (a long lock name) holds more ops than that says, and a stream with no
    size none at all; both are read whole, as the strict reader reads them."""
    monkeypatch.setattr(bulk, "BLOCK", 2048)
    bench = load_bench()
    h = bench.mutex_history(600, 3, 2, crash_rate=0.0)
    ops = plain(h, random.Random(0))
    lock_of: dict[int, str] = {}  # each call's, its invocation's
    for k, op in enumerate(ops):
        op["index"] = k
        if op["type"] == "invoke":
            lock_of[op["process"]] = "l" * 100 if k < 20 else "m"
        op["lock"] = lock_of[op["process"]]
    path = tmp_path / "h.jsonl"
    write(path, ops, spaced=True)
    grown = []
    real = bulk.ColumnStore.put

    def put(self: Any, at: int, n: int, nbytes: int, columns: Any) -> None:
        before = len(self.arrays[0]) if self.arrays else 0
        real(self, at, n, nbytes, columns)
        grown.append(before and len(self.arrays[0]) > before)

    monkeypatch.setattr(bulk.ColumnStore, "put", put)
    cols = read_columns(path, smallest=0)
    assert cols is not None and cols.ops() == read_history(path)
    assert any(grown)
    grown.clear()
    with path.open("rb") as fh:
        stream = io.BytesIO(fh.read())  # (no file number: no size)
    from_stream = bulk.read_columns(stream)
    assert from_stream is not None and from_stream.ops() == cols.ops()
    assert sum(grown) >= 3


@settings(max_examples=60, deadline=None)
@given(fs=st.lists(st.sampled_from(["acquire", "release", "extend", "a", "b", "ab", "ba"]),
                   min_size=1, max_size=4, unique=True),
       locks=st.lists(st.sampled_from(["lock", "l", "x", "ly", "yl", 'l"7']), min_size=1,
                      max_size=3, unique=True),
       picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=40),
       spoil=st.integers(-1, 10**6), split=st.booleans())
def test_the_layout_tells_each_lines_tail_exactly(fs: list[str], locks: list[str],
                                                  picks: list[int], spoil: int,
                                                  split: bool) -> None:
    """The exact-layout reader tells which known tail each line's tail (the bytes after its
    last number) is by its length and a few bytes, then compares them whole: any byte
    changed, and the block is not of the layout (the same answer as looking each tail up, its
    other way)."""
    import numpy as np

    template = bulk._Template(True)
    template.learn(fs, [None, None, *locks])
    tails = [t[0] for t in template.tails]
    which = [p % len(tails) for p in picks]
    data = b"".join(b"7" + tails[k] + b"\n" for k in which)  # (a digit before each tail)
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    begins = np.concatenate(([1], ends[:-1] + 2))
    if split:
        template.tail_offsets = None  # (tails no offsets tell apart are looked up one by one)
    if spoil >= 0:  # a byte of a tail changed
        inside = [i for b, e in zip(begins.tolist(), ends.tolist(), strict=True)
                  for i in range(b, e)]
        at = inside[spoil % len(inside)]
        data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
    got = template.tail_of(np.frombuffer(data, np.uint8), begins, ends)
    if spoil >= 0:
        assert got is None
    else:
        assert got is not None and got.tolist() == which


@pytest.mark.parametrize("spaced", [True, False])
def test_the_layout_refuses_any_byte_changed_that_is_not_a_digit(spaced: bool) -> None:
    """Every byte of a block that is not a digit is compared (the segments before each number
    where the runs of digits put them, the tail after the last one): any one of them changed
    in the middle line, and the block is not of the layout; unchanged, it is read as the
    decoder reads it."""
    import numpy as np

    dump = (lambda op: json.dumps(op).encode()) if spaced else orjson.dumps
    ops = [{"index": i, "time": 10 * i + 7, "process": i % 3, "type": t, "f": f,
            "value": None, "lock": "lock"}
           for i, (t, f) in enumerate([("invoke", "acquire"), ("ok", "acquire"),
                                       ("invoke", "release")])]
    lines = [dump(op) + b"\n" for op in ops]
    template = bulk._Template(spaced)
    template.learn(["acquire", "release"], [None, None, "lock"])
    block = b"".join(lines)
    got = template.read(block, 3)
    assert got is not None
    assert [a.tolist() for a in got[:3]] == [[op[k] for op in ops]
                                             for k in ("index", "time", "process")]
    assert got[3].tolist() == [0, 1, 0] and got[4].tolist() == [0, 0, 1]
    first = len(lines[0])
    changed = 0
    for at in range(first, first + len(lines[1]) - 1):  # (not its newline)
        if block[at:at + 1].isdigit():
            continue
        for other in (block[at] ^ 1, block[at] ^ 0x20, ord(" ")):
            if other == block[at] or bytes([other]).isdigit() or other == 10:
                continue
            spoiled = block[:at] + bytes([other]) + block[at + 1:]
            assert template.read(spoiled, 3) is None, (at, spoiled.splitlines()[1])
            changed += 1
    assert changed > 100
    assert np.array_equal(template.read(block, 3)[1], got[1])


def test_failures_of_rows_are_not_asked_about_one_by_one_and_count_the_same(
        tmp_path: Path) -> None:
    """checker.calls.Paired leaves every fail of a history in columns out without asking
    the mutex model about each row (a row has no error field, which it reads): the count is
    the one the model gives row by row."""
    from checker.calls import Paired
    from checker.models import get_model, refused_not_held
    from harness.core.columns import TYPE_CODES

    bench = load_bench()
    h = bench.mutex_history(3000, 5, seed=2, timeout_rate=0.3)
    path = tmp_path / "h.jsonl"
    write(path, h, spaced=True)
    cols = read_columns(path, smallest=0)
    assert cols is not None
    fails = [i for i in range(len(cols)) if cols.type[i] == TYPE_CODES["fail"]]
    assert len(fails) > 20
    asked = [refused_not_held(cols.op(i)) for i in fails]
    for name in LOCK_MODELS:
        paired = Paired(cols, get_model(name))
        assert paired.failed == len(fails) - sum(asked) == len(fails)
