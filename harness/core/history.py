"""The history: one JSON object a line (the contract in ARCHITECTURE.md).

An op is a plain dict, which keeps reading and checking a million ops cheap:

    {"index": 0, "time": 123456789, "process": 3, "type": "invoke", "f": "acquire",
     "value": null}

``time`` is nanoseconds since the test started (CLOCK_MONOTONIC, shared by every process on the
host); ``process`` is an int, or ``"nemesis"``. ``type`` is ``invoke`` then ``ok`` (it happened),
``fail`` (it certainly did not) or ``info`` (unknown: it may have happened, at any later time).

Each process appends its ops to a journal of its own as they happen (:mod:`harness.core.journal`),
so a run that crashes keeps what it recorded; the journals are merged into one history ordered by
time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.core.atomic import write_lines

Op = dict[str, Any]

INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
TYPES = frozenset({INVOKE, OK, FAIL, INFO})
COMPLETIONS = frozenset({OK, FAIL, INFO})
NEMESIS = "nemesis"

NS = 1_000_000_000


class HistoryError(ValueError):
    """A history (or journal) that cannot be read: the message names the file and line."""


def seconds(ns: int) -> float:
    """Nanoseconds since the test started, as seconds rounded for people (ms resolution)."""
    return round(ns / NS, 3)


def validate_op(obj: Any, where: str) -> Op:
    """Check one decoded line against the contract; return it, or raise HistoryError."""
    if not isinstance(obj, dict):
        raise HistoryError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for field in ("time", "process", "type", "f"):
        if field not in obj:
            raise HistoryError(f"{where}: missing field {field!r}")
    t = obj["type"]
    if t not in TYPES:
        raise HistoryError(
            f"{where}: unknown type {t!r} (expected one of invoke, ok, fail, info)"
        )
    time = obj["time"]
    if isinstance(time, bool) or not isinstance(time, int) or time < 0:
        raise HistoryError(f"{where}: 'time' must be a non-negative integer (ns), got {time!r}")
    process = obj["process"]
    if isinstance(process, bool) or not isinstance(process, int | str):
        raise HistoryError(f"{where}: 'process' must be an int or a name, got {process!r}")
    if not isinstance(obj["f"], str) or not obj["f"]:
        raise HistoryError(f"{where}: 'f' must be a non-empty string, got {obj['f']!r}")
    return obj


def parse_lines(lines: Iterable[str], name: str, *, ordered: bool = True) -> list[Op]:
    """Parse JSON lines. ``ordered``: times must not go backwards (true of a merged history)."""
    ops: list[Op] = []
    last = -1
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name} line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise HistoryError(f"{where}: not valid JSON ({e.msg}); truncated line?") from None
        op = validate_op(obj, where)
        if ordered and op["time"] < last:
            raise HistoryError(
                f"{where}: time {op['time']} goes backwards (previous op at {last}); "
                "a history must be ordered by time"
            )
        last = op["time"]
        ops.append(op)
    return ops


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    """Read ``history.jsonl``. Raises HistoryError naming the line that is wrong."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as fh:
            ops = parse_lines(fh, str(p))
    except OSError as e:
        raise HistoryError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{p}: not UTF-8 text; is this a history.jsonl?") from None
    for i, op in enumerate(ops):
        op.setdefault("index", i)
    return ops


def dumps(op: Op) -> str:
    return json.dumps(op, separators=(",", ":"), sort_keys=False, default=str)


def write_history(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    write_lines(path, (dumps(op) for op in ops))


def pairs(history: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """Each invocation with its completion (None when the process never completed it).

    A process has at most one op outstanding; a second invoke before a completion means the
    first never completed (its process crashed), which is as good as ``info``.
    """
    open_: dict[Any, Op] = {}
    order: list[tuple[Op, Op | None]] = []
    slot: dict[int, int] = {}
    for op in history:
        p = op["process"]
        if op["type"] == INVOKE:
            if p in open_:
                pass  # the earlier one stays uncompleted
            open_[p] = op
            slot[id(op)] = len(order)
            order.append((op, None))
        else:
            inv = open_.pop(p, None)
            if inv is None:
                # A completion with no invocation (a nemesis info, say): pair it with itself.
                order.append((op, op))
            else:
                order[slot[id(inv)]] = (inv, op)
    return iter(order)
