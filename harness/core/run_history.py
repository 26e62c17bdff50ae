"""A run's merged history with its client ops held in columns (a few tens of bytes an op), not
one dict an op: what the post-run merge gives when every client op is flat (each field and
each field of its ``value`` a number, a string, a bool or null), and what the run's checkers
read by array operations. The nemesis's ops and the final read (a handful) stay dicts.

:class:`ColumnHistory` is a ``Sequence[Op]``: indexed or iterated, it gives each op as the dict
the merge of dicts gives (the same keys in the same order, the same values), made when asked.
A reader that has no columnar way of its own (a plugin's checker, a view nobody converted) is
therefore still right, only slower; the readers that matter for a big run ask for the columns
(:attr:`ColumnHistory.clients`, :meth:`ColumnHistory.client_pairs`) instead. Like
:class:`harness.core.checks.Shared`, it carries ``derived``: each view built once.

Pure: no I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from harness.core.columns import (
    CORE,
    CORE_OR_LOCK,
    FLOAT,
    KIND_OF,
    NULL,
    OBJ,
    STR,
    TYPE_CODES,
    Columns,
    Shape,
    from_ops,
)
from harness.core.history import Op

BLOCK = 1 << 16  # client ops a ColumnHistory makes at a time when iterated


def columns_of(ops: Sequence[Op], *, indexed: bool = True, objects: bool = False
               ) -> Columns | None:
    """Client ops (dicts, in history order, each with its ``index`` first) in columns with
    every field, or None when one does not fit: a process, time, type, f or lock
    :func:`harness.core.columns.from_ops` refuses, a field that is a list or a dict (but a
    flat ``value``, or null), a field that is an int in one op and a float in another, a key
    named ``value.<k>`` (the name of the column of the value's ``k``).
    ``op(i)`` gives op ``i`` back, equal key for key, in the same order, of the same types.
    Grouped by layout (the keys, then the value's keys) and read a field at a time: passes
    in C, no Python code an op (the grouping too: keys coded in C, rows split by numpy).

    Not ``indexed``: ops with no ``index`` key yet (a journal's, read before the merge numbers
    them), ``index`` left zero for the caller to fill in (the layouts are the same: the
    ``index`` is never part of one). ``objects``: a field no scalar column holds (a list, a
    dict, a value that is no dict, two kinds) is held as it is in an object column (kind
    :data:`OBJ`), so any client op of a well-formed history fits; not ``indexed`` then, an
    ``index`` key is a field like any other, and ``index`` each op's place in ``ops``
    (``bare``: ``op(i)`` makes no other)."""
    n = len(ops)
    base = from_ops(ops)
    if base is None:
        return None
    if indexed:
        try:
            base.index = np.fromiter(map(itemgetter("index"), ops), np.int64, n)
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
    else:
        base.index = np.arange(n, dtype=np.int64) if objects else np.zeros(n, dtype=np.int64)
    skip = 1 if indexed else 0
    held = _Held(n, objects)
    shape = np.zeros(n, dtype=np.int32)
    for keys, rows in _groups(map(tuple, ops)).items():
        if ((keys[0] != "index") if indexed else ("index" in keys and not objects)) \
                or not set(CORE) <= set(keys):
            return None  # (index first: the merge's order of keys, as a row is rebuilt)
        group = _taken(ops, rows)
        layout: list[tuple[str, Any]] = []
        values: list[Any] | None = None
        for key in keys[skip:]:
            if type(key) is not str or key.startswith("value."):
                return None  # (its column would be the value's field's)
            if key in CORE_OR_LOCK:
                layout.append((key, None))
            elif key == "value":
                values = list(map(itemgetter("value"), group))
                layout.append((key, "value"))
            else:
                kind = held.put(key, rows, list(map(itemgetter(key), group)))
                if kind is None:
                    return None
                layout.append((key, kind))
        if values is None:
            shape[rows] = held.code(tuple(layout))
            continue
        kinds_v = set(map(type, values))
        for vkeys, js in _groups(map(tuple, values) if kinds_v == _DICT else
                                 map(_keys_or_kind, values)).items():
            rows_v = rows[js]
            if vkeys is None:  # a value that is neither null nor a dict
                if not objects:
                    return None
                vshape: Any = held.put("value", rows_v, _taken(values, js), whole=True)
            elif vkeys == NULL:
                vshape = NULL
            else:
                sub = _taken(values, js)
                kinds = []
                for k in vkeys:
                    kind = held.put(f"value.{k}", rows_v, list(map(itemgetter(k), sub)))
                    if kind is None:
                        return None
                    kinds.append((k, kind))
                vshape = tuple(kinds)
            shape[rows_v] = held.code(tuple((k, vshape if kd == "value" else kd)
                                            for k, kd in layout))
    base.shape, base.shapes, base.fields, base.strings = (shape, held.shapes, held.fields,
                                                          held.strings)
    base.bare = objects and not indexed
    return base


def _groups(keys: Any) -> dict[Any, np.ndarray]:
    """The rows of each distinct key, in order (the keys coded in C, the rows split by numpy:
    no Python code a row)."""
    keys = list(keys)
    distinct = dict.fromkeys(keys)
    if len(distinct) <= 1:
        return dict.fromkeys(distinct, np.arange(len(keys)))
    code = {k: i for i, k in enumerate(distinct)}
    codes = np.fromiter(map(code.__getitem__, keys), np.int64, len(keys))
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=len(code)))[:-1]
    return dict(zip(distinct, np.split(order, bounds), strict=True))


def _taken(items: Sequence[Any], rows: np.ndarray) -> list[Any]:
    """``[items[i] for i in rows]``, in C."""
    if len(rows) == len(items):
        return list(items)  # (rows are each row once, in order: every one)
    if len(rows) == 1:
        return [items[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(items))


_DICT = {dict}


def _keys_or_kind(value: Any) -> Any:
    if value is None:
        return NULL
    return tuple(value) if type(value) is dict else None


class _Held:
    """The columns of the fields being read, their strings and the layouts seen."""

    def __init__(self, n: int, objects: bool = False) -> None:
        self.n = n
        self.objects = objects
        self.fields: dict[str, np.ndarray] = {}
        self.strings: list[str] = []
        self._codes: dict[str, int] = {}
        self.shapes: list[Shape] = []
        self._shape_codes: dict[Shape, int] = {}

    def code(self, shape: Shape) -> int:
        code = self._shape_codes.get(shape)
        if code is None:
            code = self._shape_codes[shape] = len(self.shapes)
            self.shapes.append(shape)
        return code

    def put(self, name: str, rows: np.ndarray, values: list[Any], whole: bool = False
            ) -> str | None:
        """Hold one field of these rows; its kind, None when it cannot be held (two kinds,
        a list or a dict, or a column of another kind under this name): unless ``objects``,
        then held as it is (:data:`OBJ`; ``whole``: so whatever it is)."""
        kinds = set(map(type, values))
        kind = KIND_OF.get(kinds.pop()) if len(kinds) == 1 and not whole else None
        if kind == NULL:
            return kind
        column = self.fields.get(name)
        if kind is not None:
            want = np.float64 if kind == FLOAT else np.int64
            if column is None:
                column = self.fields[name] = np.zeros(self.n, dtype=want)
            if column.dtype in (want, object):
                held = values
                if kind == STR:
                    codes = self._codes
                    held = [codes.setdefault(v, len(codes)) for v in values]
                    self.strings.extend(list(codes)[len(self.strings):])
                try:
                    column[rows] = np.array(held, dtype=want)
                    return kind
                except OverflowError:  # an int past 64 bits
                    pass
        if not self.objects:
            return None
        if column is None or column.dtype != object:  # (its rows held so far, as objects)
            column = self.fields[name] = (np.zeros(self.n, dtype=object) if column is None
                                          else column.astype(object))
        for r, v in zip(rows.tolist(), values, strict=True):
            column[r] = v
        return OBJ


class ColumnHistory(Sequence[Op]):
    """A merged history: its client ops in :class:`Columns` (``clients``), every other op
    a dict (``others``, in history order). Op ``i`` is the op whose ``index`` is ``i``: the
    merge numbers ops by their place. Read-only, as every history; ``derived`` keeps what is
    derived from it (:func:`harness.core.checks.derive`)."""

    __slots__ = ("_other_at", "_others_index", "clients", "derived", "others")

    def __init__(self, clients: Columns, others: list[Op], places: list[int] | None = None
                 ) -> None:
        self.clients = clients
        self.others = others
        self._others_index = [int(op["index"]) for op in others] if places is None else places
        self._other_at = dict(zip(self._others_index, others, strict=True))
        self.derived: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self.clients) + len(self.others)

    def __getitem__(self, i: Any) -> Any:
        return item_or_slice(i, len(self), self._at, "history")

    def _at(self, i: int) -> Op:
        other = self._other_at.get(i)
        if other is not None:
            return other
        return self.clients.op(i - bisect_left(self._others_index, i))

    def __iter__(self) -> Iterator[Op]:
        return self.iterate()

    def iterate(self, block: int = BLOCK) -> Iterator[Op]:
        """Every op, in order, as the dict ``self[i]`` is: the client ops made ``block`` rows
        at a time by :meth:`Columns.ops` (a checker that iterates pays ~0.4 us an op, not
        the ~4 us of one op made at a time), the others put in their places."""
        others, places = self.others, self._others_index
        k = 0
        for lo in range(0, len(self.clients), block):
            ops = self.clients.ops(lo, lo + block)
            last = ops[-1]["index"]
            if k == len(places) or places[k] > last:
                yield from ops
                continue
            for op in ops:
                while k < len(places) and places[k] < op["index"]:
                    yield others[k]
                    k += 1
                yield op
        yield from others[k:]

    def times(self) -> np.ndarray:
        """Every op's time, in history order."""
        out = np.empty(len(self), dtype=np.int64)
        mask = np.ones(len(self), dtype=bool)
        if self.others:
            where = np.array(self._others_index, dtype=np.int64)
            mask[where] = False
            out[where] = [op["time"] for op in self.others]
        out[mask] = self.clients.time
        return out

    def horizon(self) -> int:
        """The history's last time (0 when empty)."""
        last = int(self.clients.time.max()) if len(self.clients) else 0
        return max([last, *(int(op["time"]) for op in self.others)])

    def client_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The client ops' invocations with their completions, as rows of ``clients``:
        (invocation rows in the order of the invocations, completion rows, -1 where the
        invocation never completed), as :func:`pair_rows` pairs them. Built once."""
        got = self.derived.get(ColumnHistory.client_pairs)
        if got is None:
            got = self.derived[ColumnHistory.client_pairs] = pair_rows(self.clients)
        return got  # type: ignore[no-any-return]


def item_or_slice(i: Any, n: int, at: Any, what: str) -> Any:
    """``seq[i]`` of a sequence of ``n`` items as a list reads it (a slice gives a list, a
    negative index counts from the end, one out of range raises IndexError), each item
    ``at(place)``: the read-only sequences of a history in columns index so."""
    if isinstance(i, slice):
        return [at(j) for j in range(*i.indices(n))]
    i = int(i)
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"{what} index out of range")
    return at(i)


def pair_rows(cols: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(invocation rows, in the order of the invocations; completion rows or -1) of client
    columns: a completion completes the op before it of its process if that is an invoke; one
    that does not (a malformed history's) is its own invocation and completion."""
    order = cols.by_process()
    invoke = cols.type[order] == TYPE_CODES["invoke"]
    p = cols.process[order]
    n = len(order)
    nxt_same = np.zeros(n, dtype=bool)
    if n > 1:
        nxt_same[:-1] = (p[1:] == p[:-1]) & ~invoke[1:]
    lone = ~invoke
    lone[1:] &= ~(nxt_same[:-1] & invoke[:-1])
    inv_at = np.flatnonzero(invoke | lone)
    done = np.full(len(inv_at), -1, dtype=np.int64)
    has = nxt_same[inv_at] & invoke[inv_at]
    done[has] = order[inv_at[has] + 1]
    done[lone[inv_at]] = order[inv_at[lone[inv_at]]]
    inv = order[inv_at]
    by_time = np.argsort(inv, kind="stable")
    return inv[by_time].astype(np.int64), done[by_time]


def merged_columns(history: Sequence[Op]) -> ColumnHistory | None:
    """A merged history (dicts, in order, each op's ``index`` its place) as a
    :class:`ColumnHistory`: the ops of each client process whose every op fits in columns go
    there, every other op (the nemesis's, a process with an op that does not fit: the final
    read's list) stays a dict in ``others``. None when no client op fits (nothing to gain).
    The merge of a run's journals builds the same thing journal by journal
    (:func:`harness.core.journal_columns.merge_journals_columns`)."""
    by_process: dict[Any, list[Op]] = {}
    for op in history:
        p = op.get("process")
        by_process.setdefault(p if type(p) is int else None, []).append(op)
    fits = {p for p, ops in by_process.items() if p is not None and columns_of(ops) is not None}
    if not fits:
        return None
    cols = columns_of([op for op in history if op.get("process") in fits
                       and type(op.get("process")) is int])
    if cols is None:
        return None
    others = [op for op in history if not (type(op.get("process")) is int
                                           and op["process"] in fits)]
    return ColumnHistory(cols, others)
