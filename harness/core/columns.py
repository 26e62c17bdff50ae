"""A client history held in columns (numpy arrays, a few bytes an op) rather than one dict an
op: what :mod:`harness.core.history_bulk` reads from a big JSON-lines file of plain lock client
ops (``index``, ``time``, ``process`` an int, ``type``, ``f``, ``value`` null, ``lock``), what a
run's merge gives of its client ops with every other field held too
(:func:`harness.core.run_history.columns_of`), and what the checkers read without building an
object per op. An op is made a dict (:meth:`Columns.op`) only where somebody shows it (a
witness, a message).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from harness.core.history import FAIL, INFO, INVOKE, OK

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from harness.core.history import Op

TYPE_NAMES = (INVOKE, OK, FAIL, INFO)  # type codes, in this order
TYPE_CODES = {t: i for i, t in enumerate(TYPE_NAMES)}
LOCK_ABSENT, LOCK_NULL = 0, 1  # lock codes with no name: the field is not there, or null

# A field's kind in a shape: how its column holds it (int64, float64, a string's code, a bool
# as 0/1 in int64, null: no column)
INT, FLOAT, STR, BOOL, NULL = "i", "f", "s", "b", "n"
OBJ = "o"  # a field no scalar column holds (a list, a dict, two kinds): an object column
KIND_OF = {int: INT, float: FLOAT, str: STR, bool: BOOL, type(None): NULL}
CORE = ("time", "process", "type", "f")  # every client op's own columns (after "index")
Shape = tuple[tuple[str, Any], ...]  # (key, kind), or ("value", value's shape | NULL | None)
CORE_OR_LOCK = frozenset((*CORE, "lock"))
# The layouts of plain ops (a file's): the core fields, then ``value`` (null) and ``lock``
# where the op has them; code ``has_value + 2 * (lock is there)``.
PLAIN_SHAPES: list[Shape] = [
    tuple((key, None) for key in CORE) + tail
    for tail in ((), (("value", NULL),), (("lock", None),), (("value", NULL), ("lock", None)))]


class Columns:
    """The ops of a history, position ``i`` in each column; ops are ordered by time.

    ``fs`` and ``locks`` name the codes of ``f`` and ``lock`` (``locks[0]`` and ``locks[1]``:
    absent and null); ``has_value``: a plain op has a ``value`` field (always null).

    ``shape[i]`` is the code of op ``i``'s layout in ``shapes``: its keys in order after
    ``index``, each with its kind; the key ``value`` with the shape of its dict (or
    :data:`NULL`). Plain ops' (none given) are :data:`PLAIN_SHAPES`, their codes made of
    ``has_value`` and ``lock`` when first read. ``fields`` holds a column for each other field
    seen, named by its key (``"error"``) or, for a field of the value, ``"value.session"``;
    row ``i`` of a column means something only where op ``i``'s shape has that field. Strings
    are codes into ``strings``. ``index`` is each op's place in the whole history."""

    __slots__ = ("_by_process", "_shape", "bare", "f", "fields", "fs", "has_value", "index",
                 "lock", "locks", "process", "shapes", "strings", "time", "type")

    def __init__(self, time: np.ndarray, process: np.ndarray, type_: np.ndarray,
                 f: np.ndarray, fs: list[str], lock: np.ndarray, locks: list[str | None],
                 index: np.ndarray, has_value: np.ndarray, shape: np.ndarray | None = None,
                 shapes: list[Shape] | None = None, fields: dict[str, np.ndarray] | None = None,
                 strings: list[str] | None = None) -> None:
        self.time = time
        self.process = process
        self.type = type_
        self.f = f
        self.fs = fs
        self.lock = lock
        self.locks = locks
        self.index = index
        self.has_value = has_value
        self._shape = shape
        self.shapes = list(PLAIN_SHAPES) if shapes is None else shapes
        self.fields = {} if fields is None else fields
        self.strings = [] if strings is None else strings
        self.bare = False  # the ops had no ``index`` first: ``op(i)`` makes none (``index``
        # is each op's place in the list they came from)
        self._by_process: np.ndarray | None = None

    @property
    def shape(self) -> np.ndarray:
        """Each op's layout's code (plain ops': made when first read, not a column more for
        a checker that makes no op a dict)."""
        if self._shape is None:
            self._shape = self.has_value.astype(np.int32) + 2 * (self.lock != LOCK_ABSENT)
        return self._shape

    @shape.setter
    def shape(self, shape: np.ndarray) -> None:
        self._shape = shape

    def __len__(self) -> int:
        return len(self.time)

    def row(self, i: int) -> Row:
        """The ``i``-th op as a read-only mapping whose fields are read when asked (a check
        that reads one or two fields of a million ops makes no dict of each)."""
        return Row(self, i)

    def op(self, i: int) -> Op:
        """The ``i``-th op as the strict reader gives it (a dict)."""
        i = int(i)
        out: dict[str, Any] = {} if self.bare else {"index": self.index.item(i)}
        for key, kind in self.shapes[self.shape.item(i)]:
            if key == "value" and kind is not NULL and isinstance(kind, tuple):
                out[key] = {k: self._field(f"value.{k}", kd, i) for k, kd in kind}
            else:
                out[key] = self._core(key, i) if key in CORE_OR_LOCK else \
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
                    lists.append(self._core_list(key, rows) if key in CORE_OR_LOCK
                                 else self._list(key, kind, rows))
            ops = _dicts(keys, lists, len(rows))
            if len(codes) == 1:
                return ops
            if not out:
                out = [{}] * (hi - lo)
            list(map(out.__setitem__, (rows - lo).tolist(), ops))
        return out

    def by_process(self, keep: bool = True) -> np.ndarray:
        """The positions of the ops, process by process, each process's in history order;
        kept for the next caller unless ``keep`` is False (the last one: 8 bytes an op)."""
        order = self._by_process
        if order is None:
            order = stable_order(self.process)
        self._by_process = order if keep else None
        return order

    def same_lock(self) -> np.ndarray:
        """The lock codes with absent and null made one (``op.get("lock")`` compares so)."""
        return np.where(self.lock == LOCK_ABSENT, LOCK_NULL, self.lock)

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
        name = f"value.{key}"
        has = np.array([(name, kind) in flat(shape) for shape in self.shapes] or [False])
        column = self.fields.get(name)
        if column is None:
            column = np.zeros(len(self), dtype=np.int64 if kind != FLOAT else np.float64)
        return column, has[self.shape] if len(self) else np.zeros(0, dtype=bool)


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


def flat(shape: Shape) -> set[tuple[str, str]]:
    """A layout's fields held in columns, by their columns' names, with their kinds."""
    out = set()
    for key, kind in shape:
        if key == "value" and isinstance(kind, tuple):
            out.update((f"value.{k}", kd) for k, kd in kind)
        elif kind is not None and key != "value":
            out.add((key, kind))
    return out


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of ints, sooner: keys that span fewer than 2**16
    values (processes do) are sorted as 16-bit ints, which numpy sorts by radix, in linear
    time (4x sooner at 2M keys)."""
    if len(keys) and keys.dtype.kind in "iu":
        low, high = int(keys.min()), int(keys.max())
        if high - low < 1 << 16:
            keys = (keys - low).astype(np.uint16) if low else keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")


def from_ops(ops: Sequence[Op]) -> Columns | None:
    """Client ops held as dicts (a run's merged history, its nemesis ops left out) in columns:
    a pass in C for each field, no Python code an op. None unless every op has an int time
    and process (not a bool), a type of the four, a str f, and a lock that is a str, null or
    not there (both held as null, which the caller must not take for a part's key: an op with
    no lock may have a ``key``). Not held: ``value`` (``has_value`` all false) and ``index``
    (the ops' positions: ``index`` row ``i`` is ``i``), so :meth:`Columns.op` is not the op:
    the caller reads those from ``ops`` itself."""
    n = len(ops)
    try:
        processes = list(map(_PROCESS, ops))
        fs = list(map(_F, ops))
        locks = list(map(dict.get, ops, repeat("lock")))
        if not (set(map(type, processes)) <= _INT and set(map(type, fs)) <= _STR
                and set(map(type, locks)) <= _LOCK_TYPES):
            return None
        # A time that is no int is made one as int() makes it, as the checkers of dicts do.
        time = np.fromiter(map(_TIME, ops), np.int64, n)
        process = np.array(processes, dtype=np.int64)
        type_ = np.fromiter(map(TYPE_CODES.__getitem__, map(_TYPE, ops)), np.uint8, n)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    f_names = list(dict.fromkeys(fs))
    f = np.fromiter(map({x: i for i, x in enumerate(f_names)}.__getitem__, fs), np.int32, n)
    lock_names: list[str | None] = [None, None, *(x for x in dict.fromkeys(locks)
                                                  if x is not None)]
    codes = {x: i for i, x in enumerate(lock_names) if i != LOCK_ABSENT}
    lock = np.fromiter(map(codes.__getitem__, locks), np.int32, n)
    return Columns(time, process, type_, f, f_names, lock, lock_names,
                   np.arange(n, dtype=np.int64), np.zeros(n, dtype=bool))


_TIME, _PROCESS, _TYPE, _F = (itemgetter(k) for k in ("time", "process", "type", "f"))
_INT, _STR, _LOCK_TYPES = {int}, {str}, {str, type(None)}


def well_formed(cols: Columns) -> bool:
    """Whether :func:`harness.core.wellformed.problem` finds nothing in these ops (times
    already known not to go backwards, every process a client's): per process, invoke and
    completion alternate, beginning with an invoke, a completion's f and lock its invoke's;
    indexes unique. False sends the caller to that function, for its words."""
    n = len(cols)
    if n == 0:
        return True
    idx = cols.index
    if n > 1 and not bool(np.all(idx[1:] > idx[:-1])) and len(np.unique(idx)) != n:
        return False
    order = cols.by_process()
    p = cols.process[order]
    invoke = cols.type[order] == TYPE_CODES[INVOKE]
    first = np.ones(n, dtype=bool)
    first[1:] = p[1:] != p[:-1]
    if not bool(np.all(invoke[first])):  # a process's first op completes nothing
        return False
    after = ~first[1:]  # an op of the same process as the one before it
    if bool(np.any(after & (invoke[1:] == invoke[:-1]))):  # two invokes, or two completions
        return False
    done = after & ~invoke[1:]  # a completion; the op before it is its invoke
    f = cols.f[order]
    lock = cols.same_lock()[order]
    return not bool(np.any(done & ((f[1:] != f[:-1]) | (lock[1:] != lock[:-1]))))


_COLUMN_READ = frozenset(("index", *CORE))


class Row(Mapping):  # type: ignore[type-arg]
    """An op of :class:`Columns` as a read-only mapping, equal to its dict: the fields every
    step of a check reads (index, time, process, type, f, a named lock) from their columns,
    any other (value, a null lock, error) from the op's dict, made when first asked (a
    witness's few ops)."""

    __slots__ = ("_op", "cols", "i")

    def __init__(self, cols: Columns, i: int) -> None:
        self.cols = cols
        self.i = i
        self._op: Op | None = None

    def whole(self) -> Op:
        if self._op is None:
            self._op = self.cols.op(self.i)
        return self._op

    def __getitem__(self, key: str) -> Any:
        if key in _COLUMN_READ:
            return self.cols.index.item(self.i) if key == "index" else \
                self.cols._core(key, self.i)
        if key == "lock":  # (a named lock's code: the op has the field)
            code = self.cols.lock.item(self.i)
            if code > LOCK_NULL:
                return self.cols.locks[code]
        return self.whole()[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def __eq__(self, other: object) -> bool:
        return self.whole() == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]  # (as a dict's)

    def __repr__(self) -> str:
        return repr(self.whole())
