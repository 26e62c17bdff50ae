"""The columns of a big file read with blocks dealt to threads (harness.core.ahead, used by
harness.core.history_bulk.read_columns) are the columns read block after block in one thread:
the same arrays and names, names first seen late in the file included (the template learns
them while other blocks are being read), and the same refusal (None, then the strict reader's
error naming the line) for a line that is wrong anywhere, with no thread left behind."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.core.history_bulk as bulk
from harness.core.ahead import Ahead
from harness.core.history import HistoryError
from harness.core.history_file import read_columns, read_history

FIELDS = ("time", "process", "type", "f", "lock", "index", "has_value")


def lock_ops(n: int, *, locks: list[str | None], late: str | None = None,
             late_at: int = 0) -> list[dict[str, Any]]:
    """A well-formed history of ``n`` invoke/ok pairs over a few processes; from pair
    ``late_at`` on, every third pair on the lock ``late`` (a name not seen before)."""
    ops: list[dict[str, Any]] = []
    t = 0
    for i in range(n):
        p = i % 5
        lock = late if late is not None and i >= late_at and i % 3 == 0 else locks[i % len(locks)]
        f = "acquire" if (i // 5) % 2 == 0 else "release"
        for typ in ("invoke", "ok"):
            op: dict[str, Any] = {"index": len(ops), "time": t, "process": p, "type": typ, "f": f,
                                  "value": None}
            if lock is not None:
                op["lock"] = lock
            ops.append(op)
            t += 1000 + (i * 7919) % 10_007
    return ops


def write(path: Path, ops: list[dict[str, Any]], spaced: bool = True) -> Path:
    sep = None if spaced else (",", ":")
    path.write_text("".join(json.dumps(op, separators=sep) + "\n" for op in ops))
    return path


def read(path: Path, threads: int, block: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(bulk, "BLOCK", block)
    monkeypatch.setattr(bulk, "THREADS", threads)
    before = threading.active_count()
    cols = read_columns(path, smallest=0)
    assert threading.active_count() == before  # (the reader's threads are gone)
    return cols


def assert_same(a: Any, b: Any) -> None:
    assert (a is None) == (b is None)
    if a is None:
        return
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.fs == b.fs and a.locks == b.locks


@pytest.mark.parametrize("spaced", [True, False])
@pytest.mark.parametrize("block", [300, 2048])
def test_threads_read_the_columns_one_thread_reads(tmp_path: Path, spaced: bool, block: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ops = lock_ops(600, locks=["lock", "b"], late="late-lock", late_at=400)
    path = write(tmp_path / "h.jsonl", ops, spaced)
    one = read(path, 0, block, monkeypatch)
    assert one is not None and one.ops() == ops
    assert "late-lock" in one.locks
    for threads in (1, 2, 3):
        assert_same(read(path, threads, block, monkeypatch), one)


def test_blocks_the_layout_reads_are_most_of_them(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With threads, the blocks are still read by the exact layout (not all decoded), and
    every block's result is taken once, in order."""
    ops = lock_ops(800, locks=["lock"])
    path = write(tmp_path / "h.jsonl", ops)
    fitted = []
    layout_read = bulk._Template.read

    def counted(self: Any, block: bytes, n: int) -> Any:
        got = layout_read(self, block, n)
        fitted.append(got is not None)
        return got

    monkeypatch.setattr(bulk._Template, "read", counted)
    cols = read(path, 1, 1024, monkeypatch)
    assert cols is not None and cols.ops() == ops
    assert sum(fitted) >= 100


@pytest.mark.parametrize("where", [0.0, 0.5, 0.999])
@pytest.mark.parametrize("bad", [
    b'{"index": 5, "time": 1, "process": 0, "type": "ok", "f": "acquire", "value": null,'
    b' "lock": "lock"',  # cut short
    b'{"index": 5, "time": -1, "process": 0, "type": "ok", "f": "acquire", "value": null,'
    b' "lock": "lock"}',  # a negative time
    b'{"index": 5, "time": 1, "process": 0, "type": "ok", "f": "acquire", "value": null,'
    b' "lock": "lock", "lock": "x"}',  # a key twice
    b'{"index": 5, "time": 1, "process": 0, "type": "maybe", "f": "acquire", "value": null,'
    b' "lock": "lock"}',  # no such type
])
def test_a_wrong_line_anywhere_is_refused_as_the_strict_reader_refuses_it(
        tmp_path: Path, where: float, bad: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = lock_ops(500, locks=["lock"])
    lines = [json.dumps(op).encode() + b"\n" for op in ops]
    at = int(len(lines) * where)
    lines[at] = bad + b"\n"
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(lines))
    for threads in (0, 1, 2):
        assert read(path, threads, 700, monkeypatch) is None
    monkeypatch.setattr(bulk, "BLOCK", 700)
    with pytest.raises(HistoryError) as e:
        read_history(path)
    assert f"line {at + 1}" in str(e.value)


def test_ahead_gives_results_in_order_and_errors_where_they_happen() -> None:
    with Ahead(2) as ahead:
        assert ahead.depth == 3
        jobs = [ahead.submit(pow, 2, k) for k in range(20)]
        assert [j.result() for j in jobs] == [2 ** k for k in range(20)]
        bad = ahead.submit(int, "x")
        ahead.quiet()
        with pytest.raises(ValueError):
            bad.result()
    with Ahead(0) as alone:  # no thread: done when asked, in the caller's thread
        seen = []
        job = alone.submit(lambda: seen.append(threading.get_ident()) or 7)
        assert seen == [] and job.result() == 7 and seen == [threading.get_ident()]


def test_spare_cores_leave_out_the_busy_ones(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    """Cores less the threads running besides this one (/proc/loadavg's fourth field, this
    one among them), else less the load average; a count that makes no sense is none."""
    import builtins

    import harness.core.ahead as ahead

    monkeypatch.setattr(ahead, "cores", lambda: 2)
    real_open = builtins.open
    fake = tmp_path / "loadavg"

    def opened(path: Any, *args: Any, **kw: Any) -> Any:
        return real_open(fake if path == "/proc/loadavg" else path, *args, **kw)

    monkeypatch.setattr(builtins, "open", opened)
    for text, spare in (("0.5 0.4 0.3 1/180 99", 2), ("1.9 2.0 2.0 2/181 99", 1),
                        ("0.1 0.1 0.1 3/181 99", 0), ("0.1 0.1 0.1 9/181 99", 0)):
        fake.write_text(text + "\n")
        assert ahead.spare_cores() == spare, text
    fake.write_text("garbage\n")  # the load average then
    for load, spare in ((0.2, 2), (0.9, 1), (1.4, 1), (1.6, 0), (7.0, 0)):
        monkeypatch.setattr(ahead.os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert ahead.spare_cores() == spare, load


@pytest.mark.parametrize("spare", [0, 1, 2, 5])
def test_the_cores_spared_decide_the_threads_not_what_is_read(
        tmp_path: Path, spare: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """However many cores are spare, none included (a busy machine: no thread, and still
    every block read), the columns are the same."""
    import harness.core.ahead as ahead

    ops = lock_ops(300, locks=["lock"])
    path = write(tmp_path / "h.jsonl", ops)
    monkeypatch.setattr(ahead, "spare_cores", lambda: spare)
    cols = read(path, None, 1024, monkeypatch)  # type: ignore[arg-type]
    assert cols is not None and cols.ops() == ops
    with Ahead(spare - 1) as dealt:
        assert dealt.depth == max(1, spare)
        assert [dealt.submit(abs, -k).result() for k in range(5)] == list(range(5))
