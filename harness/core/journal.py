"""Journals: each process appends its own ops as they happen; after the run they are merged.

A journal line is written with one ``write`` system call on a file opened ``O_APPEND``, and no
buffer of our own sits in between: a client killed with SIGKILL (a nemesis, or the kernel when
the controller dies) loses nothing it recorded, and at worst leaves one torn last line, which
the reader drops.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from harness.core.history import Op, parse_lines

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


class JournalWriter:
    """Appends one process's ops to its journal as they happen, one system call a line."""

    def __init__(self, path: str | os.PathLike[str], process: int | str, t0_ns: int) -> None:
        self.path = Path(path)
        self.process = process
        self.t0_ns = t0_ns
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.lines = 0

    def now(self) -> int:
        return max(0, time.monotonic_ns() - self.t0_ns)

    def record(self, type_: str, f: str, value: Any = None, **extra: Any) -> Op:
        op: Op = {"time": max(0, time.monotonic_ns() - self.t0_ns), "process": self.process,
                  "type": type_, "f": f, "value": value}
        for k, v in extra.items():
            if v is not None:
                op[k] = v
        if self._fd is not None:
            os.write(self._fd, encode(op))
            self.lines += 1
        return op

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def encode(op: Op) -> bytes:
    """One journal line: JSON encoded once, in C, with its newline (anything orjson cannot
    encode, a lone surrogate in an error text say, falls back to json with escapes)."""
    try:
        return orjson.dumps(op, option=_OPTIONS, default=str)
    except (orjson.JSONEncodeError, TypeError):
        from harness.core.history import dumps

        return (dumps(_whole(op)) + "\n").encode("utf-8")


def _whole(value: Any) -> Any:
    """``value`` with every lone surrogate (an error text decoded with surrogateescape, say)
    spelled as text, ``\\udcff``: a history holds no half characters (it would be malformed)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_whole(k): _whole(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _whole(str(value))  # what orjson's default=str would have written


def read_journal(path: Path) -> list[Op]:
    """A journal may end in a torn line (its writer was killed mid-write): that line is dropped."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]  # no newline yet: the write was cut off
    return parse_lines(lines, str(path), ordered=False)


def merge_journals(paths: Iterable[Path]) -> list[Op]:
    """Merge per-process journals into one history ordered by time (stable within a journal)."""
    keyed: list[tuple[int, int, int, Op]] = []
    for j, path in enumerate(sorted(paths)):
        for k, op in enumerate(read_journal(path)):
            keyed.append((op["time"], j, k, op))
    keyed.sort()  # (time, journal, line) is unique: the ops themselves are never compared
    ops = [x[3] for x in keyed]
    for i, op in enumerate(ops):
        op.pop("index", None)
        ops[i] = {"index": i, **op}
    return ops
