"""history.jsonl written (:func:`write_history`), and its lines of a
:class:`harness.core.run_history.ColumnHistory`, byte for byte what the same ops as dicts are
written as, made without a dict an op.

Why: a run's merged history is columns, and its history.jsonl is written after its check; made
op by op as dicts (4.5 us an op to make, then encoded) it would cost seconds for 600k ops.
Here the ops of one layout, type, f and lock are written by one format, made once: orjson's
bytes of the constant parts (the keys, the names), ``%d`` where an int goes (Python writes an
int as orjson does), ``%b`` where the bytes of a float, a string or a bool go, each distinct
value encoded once by orjson. The lines are made a block of places at a time, in order; the
other ops (the nemesis's, the final read's) are encoded as the dict writer encodes them, and
so is any op with a string orjson does not encode (a lone surrogate: the writer's fallback
encodes the whole op otherwise).

Pure but for :func:`write_history`.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import orjson

from harness.core.atomic import replacing
from harness.core.columns import BOOL, FLOAT, INT, NULL, TYPE_NAMES, Columns
from harness.core.history import Op
from harness.core.journal import encode
from harness.core.run_history import ColumnHistory

BLOCK = 1 << 15  # places a block of lines is made of


def write_history(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    """history.jsonl, atomically: each op encoded by orjson, as a journal line is (json where
    orjson cannot: a lone surrogate), a few times faster than the json module; a
    :class:`ColumnHistory` by :func:`history_lines`, the same bytes with no dict an op."""
    with replacing(path) as tmp, tmp.open("wb") as fh:
        if isinstance(ops, ColumnHistory):
            fh.writelines(history_lines(ops))
            return
        fh.writelines(encode(op) + b"\n" for op in ops)  # a journal line has no newline


def history_lines(h: ColumnHistory, block: int = BLOCK) -> Iterator[bytes]:
    """The lines of ``h`` (each with its newline), a block of places at a time joined."""
    cols = h.clients
    formats = _Formats(cols)
    key = formats.keys()
    other_places = [op["index"] for op in h.others]
    for start in range(0, len(h), block):
        end = min(start + block, len(h))
        out: list[bytes] = [b""] * (end - start)
        lo, hi = np.searchsorted(cols.index, [start, end]).tolist()
        if hi > lo:
            for rows in _groups(key[lo:hi], lo):
                places = (cols.index[rows] - start).tolist()
                list(map(out.__setitem__, places, formats.lines(rows)))
        for k in range(bisect_left(other_places, start), bisect_left(other_places, end)):
            out[other_places[k] - start] = encode(h.others[k]) + b"\n"
        yield b"".join(out)


def _groups(key: np.ndarray, first: int) -> list[np.ndarray]:
    """The rows (``first`` + position) of each distinct key, in order."""
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(key[order][1:] != key[order][:-1]) + 1
    return [rows + first for rows in np.split(order, cuts)]


class _Formats:
    """Each kind of line's format, made when first asked, and the encoded values."""

    def __init__(self, cols: Columns) -> None:
        self.cols = cols
        self.strings = [_encoded(s) for s in cols.strings]  # None: orjson refuses it
        self.fs = [_encoded(s) for s in cols.fs]
        self.locks = [_encoded(s) for s in cols.locks]
        self._made: dict[tuple[int, ...], Any] = {}
        self._strings_array: np.ndarray | None = None

    def keys(self) -> np.ndarray:
        """A key an op: its layout, type, f and lock, as one int."""
        c = self.cols
        key = c.shape.astype(np.int64) * 4 + c.type
        key = key * max(len(c.fs), 1) + c.f
        return key * max(len(c.locks), 1) + c.lock

    def lines(self, rows: np.ndarray) -> list[bytes]:
        """The lines of ``rows`` (ops of one layout, type, f and lock)."""
        c = self.cols
        r = int(rows[0])
        kind_of_line = (c.shape.item(r), c.type.item(r), c.f.item(r), c.lock.item(r))
        made = self._made.get(kind_of_line)
        if made is None:
            made = self._made[kind_of_line] = self._format(r)
        text, parts = made
        if text is None:  # a name orjson does not encode: op by op, as the dict writer
            return [encode(c.op(i)) + b"\n" for i in rows.tolist()]
        args = [c.index[rows].tolist()]
        odd: np.ndarray | None = None
        for name, kind in parts:
            column = (c.time if name == "time" else c.process if name == "process"
                      else c.fields[name])[rows]
            if kind == INT:
                args.append(column.tolist())
            elif kind == BOOL:
                args.append(_BOOLS[(column != 0).astype(np.intp)].tolist())
            elif kind == FLOAT:
                distinct, where = np.unique(column.view(np.int64), return_inverse=True)
                texts = np.array([orjson.dumps(x) for x in distinct.view(np.float64).tolist()],
                                 dtype=object)
                args.append(texts[where].tolist())
            else:  # STR
                texts = self._strings()[column]
                bad = np.equal(texts, None)
                if bool(bad.any()):
                    odd = bad if odd is None else odd | bad
                    texts = np.where(bad, b"", texts)
                args.append(texts.tolist())
        lines = list(map(text.__mod__, zip(*args, strict=True)))
        if odd is not None:  # a string orjson does not encode: that op as the dict writer
            for k in np.flatnonzero(odd).tolist():
                lines[k] = encode(c.op(int(rows[k]))) + b"\n"
        return lines

    def _strings(self) -> np.ndarray:
        if self._strings_array is None:
            self._strings_array = np.array([*self.strings, None], dtype=object)[:-1]
        return self._strings_array

    def _format(self, r: int) -> tuple[bytes | None, list[tuple[str, str]]]:
        """The format of op ``r``'s kind of line, and the fields it puts in after the index
        (name and kind); None when a name or a key of it is one orjson does not encode."""
        c = self.cols
        names = {"type": _encoded(TYPE_NAMES[c.type.item(r)]), "f": self.fs[c.f.item(r)],
                 "lock": self.locks[c.lock.item(r)]}
        if any(v is None for v in names.values()):
            return None, []
        shape = c.shapes[c.shape.item(r)]
        keys = [_encoded(key) for key, _ in shape]
        keys += [_encoded(k) for key, kind in shape if key == "value" and isinstance(kind, tuple)
                 for k, _ in kind]
        if any(k is None for k in keys):
            return None, []
        out = [b'{"index":%d']
        parts: list[tuple[str, str]] = []
        for key, kind in shape:
            out.append(b"," + _literal(orjson.dumps(key)) + b":")
            if key in ("time", "process"):
                out.append(b"%d")
                parts.append((key, INT))
            elif key in names:
                out.append(_literal(names[key]))  # type: ignore[arg-type]
            elif key == "value" and isinstance(kind, tuple):
                inner = []
                for k, kd in kind:
                    inner.append(_literal(orjson.dumps(k)) + b":" + _slot(kd))
                    if kd != NULL:
                        parts.append((f"value.{k}", kd))
                out.append(b"{" + b",".join(inner) + b"}")
            else:
                out.append(_slot(kind))
                if kind != NULL:
                    parts.append((key, kind))
        out.append(b"}\n")
        return b"".join(out), parts


_BOOLS = np.array([b"false", b"true"], dtype=object)


def _slot(kind: Any) -> bytes:
    return b"null" if kind in (NULL, None) else b"%d" if kind == INT else b"%b"


def _literal(part: bytes) -> bytes:
    return part.replace(b"%", b"%%")


def _encoded(text: Any) -> bytes | None:
    """orjson's bytes of ``text`` (a str or None), or None where orjson refuses it."""
    try:
        return orjson.dumps(text)
    except TypeError:
        return None
