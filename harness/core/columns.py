"""A client history held in columns (numpy arrays, a few bytes an op) rather than one dict an
op: what :mod:`harness.core.history_bulk` reads from a big JSON-lines file whose every op has
the plain shape of a lock client's op (``index``, ``time``, ``process`` an int, ``type``, ``f``,
``value`` null, ``lock``), and what the checkers read without building an object per op. An op
is made a dict (:meth:`Columns.op`) only where somebody shows it (a witness, a message).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter

import numpy as np

from harness.core.history import FAIL, INFO, INVOKE, OK

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

    from harness.core.history import Op

TYPE_NAMES = (INVOKE, OK, FAIL, INFO)  # type codes, in this order
TYPE_CODES = {t: i for i, t in enumerate(TYPE_NAMES)}
LOCK_ABSENT, LOCK_NULL = 0, 1  # lock codes with no name: the field is not there, or null


class Columns:
    """The ops of a history, position ``i`` in each column; ops are ordered by time.

    ``fs`` and ``locks`` name the codes of ``f`` and ``lock`` (``locks[0]`` and ``locks[1]``:
    absent and null); ``has_value``: the op has a ``value`` field (always null)."""

    __slots__ = ("_by_process", "f", "fs", "has_value", "index", "lock", "locks", "process",
                 "time", "type")

    def __init__(self, time: np.ndarray, process: np.ndarray, type_: np.ndarray,
                 f: np.ndarray, fs: list[str], lock: np.ndarray, locks: list[str | None],
                 index: np.ndarray, has_value: np.ndarray) -> None:
        self.time = time
        self.process = process
        self.type = type_
        self.f = f
        self.fs = fs
        self.lock = lock
        self.locks = locks
        self.index = index
        self.has_value = has_value
        self._by_process: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.time)

    def op(self, i: int) -> Op:
        """The ``i``-th op as the strict reader gives it (a dict)."""
        i = int(i)
        op: dict[str, Any] = {"index": self.index.item(i), "time": self.time.item(i),
                              "process": self.process.item(i),
                              "type": TYPE_NAMES[self.type.item(i)], "f": self.fs[self.f.item(i)]}
        if self.has_value.item(i):
            op["value"] = None
        code = self.lock.item(i)
        if code != LOCK_ABSENT:
            op["lock"] = self.locks[code]
        return op

    def row(self, i: int) -> Row:
        """The ``i``-th op as a read-only mapping whose fields are read when asked (a check
        that reads one or two fields of a million ops makes no dict of each)."""
        return Row(self, i)

    def ops(self) -> list[Op]:
        """Every op as a dict (a small history, or a test: a big one is what columns avoid)."""
        return [self.op(i) for i in range(len(self))]

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


class Row(Mapping):  # type: ignore[type-arg]
    """An op of :class:`Columns`, its fields read from the columns when asked: what
    :meth:`Columns.op` gives, as a mapping."""

    __slots__ = ("cols", "i")

    def __init__(self, cols: Columns, i: int) -> None:
        self.cols = cols
        self.i = i

    def __getitem__(self, key: str) -> Any:
        cols, i = self.cols, self.i
        if key == "process":
            return cols.process.item(i)
        if key == "type":
            return TYPE_NAMES[cols.type.item(i)]
        if key == "index":
            return cols.index.item(i)
        if key == "time":
            return cols.time.item(i)
        if key == "f":
            return cols.fs[cols.f.item(i)]
        if key == "value" and cols.has_value.item(i):
            return None
        if key == "lock":
            code = cols.lock.item(i)
            if code != LOCK_ABSENT:
                return cols.locks[code]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self.cols.op(self.i))

    def __len__(self) -> int:
        return len(self.cols.op(self.i))

    def __eq__(self, other: object) -> bool:
        return self.cols.op(self.i) == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]  # (as a dict's)

    def __repr__(self) -> str:
        return repr(self.cols.op(self.i))
