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
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from operator import itemgetter
from typing import Any

import numpy as np

from harness.core.columns import LOCK_ABSENT, TYPE_CODES, TYPE_NAMES, Columns, Row
from harness.core.history import Op

# A field's kind in a shape: how its column holds it (int64, float64, a string's code, a bool
# as 0/1 in int64, null: no column)
INT, FLOAT, STR, BOOL, NULL = "i", "f", "s", "b", "n"
OBJ = "o"  # a field no scalar column holds (a list, a dict, two kinds): an object column
KIND_OF = {int: INT, float: FLOAT, str: STR, bool: BOOL, type(None): NULL}
CORE = ("time", "process", "type", "f")  # every client op's own columns (after "index")
Shape = tuple[tuple[str, Any], ...]  # (key, kind), or ("value", value's shape | NULL | None)


class RunColumns(Columns):
    """:class:`harness.core.columns.Columns` of client ops whose other fields are held too.

    ``shape[i]`` is the code of op ``i``'s layout in ``shapes``: its keys in order after
    ``index``, each with its kind; the key ``value`` with the shape of its dict (or
    :data:`NULL`). ``fields`` holds a column for each field seen, named by its key
    (``"error"``) or, for a field of the value, ``"value.session"``; row ``i`` of a column
    means something only where op ``i``'s shape has that field. Strings are codes into
    ``strings``. ``index`` is each op's place in the whole history."""

    __slots__ = ("bare", "fields", "shape", "shapes", "strings")

    def __init__(self, base: Columns, shape: np.ndarray, shapes: list[Shape],
                 fields: dict[str, np.ndarray], strings: list[str]) -> None:
        super().__init__(base.time, base.process, base.type, base.f, base.fs, base.lock,
                         base.locks, base.index, base.has_value)
        self.bare = False  # the ops had no ``index`` first: ``op(i)`` makes none (``index``
        # is each op's place in the list they came from)
        self.shape = shape
        self.shapes = shapes
        self.fields = fields
        self.strings = strings

    def row(self, i: int) -> Row:
        """The ``i``-th op as a read-only mapping (:class:`RunRow`: every field, not only the
        core ones :class:`harness.core.columns.Row` reads)."""
        return RunRow(self, i)

    def op(self, i: int) -> Op:
        i = int(i)
        out: dict[str, Any] = {} if self.bare else {"index": self.index.item(i)}
        for key, kind in self.shapes[self.shape.item(i)]:
            if key == "value" and kind is not NULL and isinstance(kind, tuple):
                out[key] = {k: self._field(f"value.{k}", kd, i) for k, kd in kind}
            else:
                out[key] = self._core(key, i) if key in _CORE_OR_LOCK else \
                    self._field(key, kind, i)
        return out

    def ops(self, lo: int = 0, hi: int | None = None) -> list[Op]:
        """Ops ``lo`` to ``hi`` (every one by default) as :meth:`op` makes each, made a
        layout at a time: each field's column read as a list in C, the dicts made by
        ``map(dict, zip(...))``, no Python code an op."""
        hi = len(self) if hi is None else min(hi, len(self))
        if hi <= lo:
            return []
        shape = self.shape[lo:hi]
        codes = np.unique(shape).tolist()
        out: list[Op] = []
        for code in codes:
            rows = np.arange(lo, hi) if len(codes) == 1 else np.flatnonzero(shape == code) + lo
            keys, lists = ([], []) if self.bare else (["index"], [self.index[rows].tolist()])
            for key, kind in self.shapes[code]:
                keys.append(key)
                if key == "value" and isinstance(kind, tuple):
                    vkeys = [k for k, _ in kind]
                    lists.append(_dicts(vkeys, [self._list(f"value.{k}", kd, rows)
                                                for k, kd in kind], len(rows)))
                else:
                    lists.append(self._core_list(key, rows) if key in _CORE_OR_LOCK
                                 else self._list(key, kind, rows))
            ops = _dicts(keys, lists, len(rows))
            if len(codes) == 1:
                return ops
            if not out:
                out = [{}] * (hi - lo)
            list(map(out.__setitem__, (rows - lo).tolist(), ops))
        return out

    def _core_list(self, key: str, rows: np.ndarray) -> list[Any]:
        if key in ("time", "process"):
            return getattr(self, key)[rows].tolist()  # type: ignore[no-any-return]
        names = {"type": TYPE_NAMES, "f": self.fs, "lock": self.locks}[key]
        column = {"type": self.type, "f": self.f, "lock": self.lock}[key]
        return np.array(names, dtype=object)[column[rows]].tolist()  # type: ignore[no-any-return]

    def _list(self, name: str, kind: str, rows: np.ndarray) -> list[Any]:
        if kind == NULL:
            return [None] * len(rows)
        values = self.fields[name][rows].tolist()
        if kind == STR:
            return list(map(self.strings.__getitem__, values))
        return list(map(bool, values)) if kind == BOOL else values  # type: ignore[no-any-return]

    def _core(self, key: str, i: int) -> Any:
        if key == "time":
            return self.time.item(i)
        if key == "process":
            return self.process.item(i)
        if key == "type":
            return TYPE_NAMES[self.type.item(i)]
        if key == "f":
            return self.fs[self.f.item(i)]
        return self.locks[self.lock.item(i)]  # lock

    def _field(self, name: str, kind: str, i: int) -> Any:
        if kind == NULL:
            return None
        x = self.fields[name].item(i)
        if kind == STR:
            return self.strings[x]
        if kind == BOOL:
            return bool(x)
        return x

    def value_of(self, key: str, kind: str = INT) -> tuple[np.ndarray, np.ndarray]:
        """(column, present): field ``key`` of each op's value, and where the op's value is a
        dict holding it with that kind (elsewhere the column's row means nothing)."""
        return self.field_of(f"value.{key}", kind)

    def field_of(self, name: str, kind: str = INT) -> tuple[np.ndarray, np.ndarray]:
        """(column, present) of a field by its name (``"error"``, ``"value.session"``)."""
        has = np.zeros(len(self.shapes), dtype=bool)
        for code, shape in enumerate(self.shapes):
            has[code] = (name, kind) in _flat(shape)
        column = self.fields.get(name)
        if column is None:
            column = np.zeros(len(self), dtype=np.int64 if kind != FLOAT else np.float64)
        return column, has[self.shape] if len(self) else np.zeros(0, dtype=bool)


_CORE_OR_LOCK = frozenset((*CORE, "lock"))
BLOCK = 1 << 16  # client ops a ColumnHistory makes at a time when iterated


def _dicts(keys: list[str], lists: list[list[Any]], n: int) -> list[dict[str, Any]]:
    """``n`` dicts, the ``j``-th ``{keys[k]: lists[k][j]}``."""
    if not keys:
        return [{} for _ in range(n)]
    return list(map(_maker(tuple(keys)), *lists))


@cache
def _maker(keys: tuple[str, ...]) -> Any:
    """``lambda a0, a1, ...: {keys[0]: a0, keys[1]: a1, ...}``: a dict display, a third
    sooner than ``dict(zip(keys, row))``. The code names only its own arguments and ``k0``,
    ``k1``, ...; the keys (a file's text) are values bound to those names, never code."""
    args = ", ".join(f"a{i}" for i in range(len(keys)))
    pairs = ", ".join(f"k{i}: a{i}" for i in range(len(keys)))
    return eval(f"lambda {args}: {{{pairs}}}", {f"k{i}": k for i, k in enumerate(keys)})


_COLUMN_READ = frozenset(("index", *CORE))


class RunRow(Row):
    """An op of :class:`RunColumns` as a read-only mapping, equal to its dict: the fields
    every step of a check reads (index, time, process, type, f) from their columns, any other
    (value, lock, error) from the op's dict, made when first asked (a witness's few ops). A
    row of plain :class:`Columns` holds no value, and cannot tell a lock absent from null."""

    __slots__ = ("_op",)

    def __init__(self, cols: Columns, i: int) -> None:
        super().__init__(cols, i)
        self._op: Op | None = None

    def whole(self) -> Op:
        if self._op is None:
            self._op = self.cols.op(self.i)
        return self._op

    def __getitem__(self, key: str) -> Any:
        if key in _COLUMN_READ:
            return super().__getitem__(key)
        return self.whole()[key]

    def get(self, key: str, default: Any = None) -> Any:
        if key in _COLUMN_READ:
            return super().__getitem__(key)
        return self.whole().get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def __eq__(self, other: object) -> bool:
        return self.whole() == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]  # (as a dict's)

    def __repr__(self) -> str:
        return repr(self.whole())


def _flat(shape: Shape) -> set[tuple[str, str]]:
    out = set()
    for key, kind in shape:
        if key == "value" and isinstance(kind, tuple):
            out.update((f"value.{k}", kd) for k, kd in kind)
        elif key not in _CORE_OR_LOCK:
            out.add((key, kind))
    return out


def columns_of(ops: Sequence[Op], *, indexed: bool = True, objects: bool = False
               ) -> RunColumns | None:
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
    from harness.core.columns import from_ops

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
            if key in _CORE_OR_LOCK:
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
    cols = RunColumns(base, shape, held.shapes, held.fields, held.strings)
    cols.bare = objects and not indexed
    return cols


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
    """A merged history: its client ops in :class:`RunColumns` (``clients``), every other op
    a dict (``others``, in history order). Op ``i`` is the op whose ``index`` is ``i``: the
    merge numbers ops by their place. Read-only, as every history; ``derived`` keeps what is
    derived from it (:func:`harness.core.checks.derive`)."""

    __slots__ = ("_other_at", "_others_index", "clients", "derived", "others")

    def __init__(self, clients: RunColumns, others: list[Op], places: list[int] | None = None
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
        at a time by :meth:`RunColumns.ops` (a checker that iterates pays ~0.4 us an op, not
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


def history_of(cols: Columns) -> ColumnHistory:
    """A file's plain client ops (:func:`harness.core.history_file.read_columns`) as the
    :class:`ColumnHistory` a run's merge gives, the columns shared: each op's layout is its
    core fields, then ``value`` (null) and ``lock`` where it has them, the order
    :meth:`Columns.op` gives."""
    core: Shape = tuple((key, None) for key in CORE)
    shapes = [core + tail for tail in ((), (("value", NULL),), (("lock", None),),
                                       (("value", NULL), ("lock", None)))]
    shape = cols.has_value.astype(np.int32) + 2 * (cols.lock != LOCK_ABSENT)
    return ColumnHistory(RunColumns(cols, shape, shapes, {}, []), [])

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
