"""The client op pairs of a history, as rows of its columns, and the few field readers the
checkers need to build their own objects (one a grant, an attempt, a write) from those rows
without a dict an op.

:func:`as_columns` is the one entry: whatever the history (a run's
:class:`harness.core.run_history.ColumnHistory`, a list of dicts of a test or a plugin), every
client op in columns, whatever it holds. :class:`ColumnPairs` is what
:func:`checker.sessions.client_pairs` gives: a ``Sequence`` of the (invocation, completion)
dict pairs, in order, made when asked (correct for any reader, slow), whose rows a reader that
knows it reads instead.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from harness.core.checks import derive
from harness.core.columns import BOOL, FLOAT, INT, LOCK_ABSENT, NULL, OBJ, STR, Columns
from harness.core.history import HistoryError, Op
from harness.core.journal_columns import joined_parts, reordered
from harness.core.run_history import ColumnHistory, columns_of, item_or_slice
from harness.core.wellformed import require_checked

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

Pair = tuple[Op, "Op | None"]


def as_columns(history: Sequence[Op]) -> ColumnHistory:
    """``history`` with every client op (an int ``process``) in columns, the others (the
    nemesis's) dicts: once per shared history. A run's history is one already, but for the
    client ops no scalar column holds (the final read's list), joined to its columns here; a
    list of dicts is put in columns (its ops' ``index`` where each has one first, else their
    places). Refused (:class:`HistoryError`) when a client op's time, type, f or lock is
    none an op has, in the words of :func:`harness.core.wellformed.require_checked` where it
    finds more."""
    return derive(history, as_columns, lambda: _as_columns(history))


def _is_client(op: Op) -> bool:
    return type(op.get("process")) is int


def _as_columns(history: Sequence[Op]) -> ColumnHistory:
    h = history if isinstance(history, ColumnHistory) else None
    if h is not None:
        extra = [op for op in h.others if _is_client(op)]
        if not extra:
            return h
        cols = columns_of(extra, objects=True)
        try:
            joined = None if cols is None else joined_parts([copy.copy(h.clients), cols])
        except (TypeError, IndexError, ValueError):
            joined = None
        if joined is not None:
            index = np.concatenate([h.clients.index, cols.index])  # type: ignore[union-attr]
            order = np.argsort(index, kind="stable")
            joined = reordered(joined, order)
            joined.index = index[order]
            return ColumnHistory(joined, [op for op in h.others if not _is_client(op)])
    ops = list(history)
    clients = [op for op in ops if _is_client(op)]
    others = [op for op in ops if not _is_client(op)]
    cols = None
    if all(type(op.get("index")) is int for op in others):
        cols = columns_of(clients, objects=True)
    if cols is not None and len(np.unique(cols.index)) == len(cols):
        return ColumnHistory(cols, others)
    cols = columns_of(clients, indexed=False, objects=True)
    if cols is None:
        require_checked(history)
        raise HistoryError("malformed history: a client op whose time is no int, type none "
                           "of the four, f no string or lock no string nor null (or with a "
                           "key named value.<k>)")
    places = [i for i, op in enumerate(ops) if _is_client(op)]
    cols.index = np.array(places, dtype=np.int64)
    return ColumnHistory(cols, others, [i for i, op in enumerate(ops) if not _is_client(op)])


class ColumnPairs(Sequence[Pair]):
    """A history's client ops' invocations with their completions, in columns: ``inv``,
    ``done``, rows of ``cols`` (-1 where never completed), in invocation order."""

    __slots__ = ("cols", "done", "inv")

    def __init__(self, cols: Columns, inv: np.ndarray, done: np.ndarray) -> None:
        self.cols = cols
        self.inv = inv
        self.done = done

    def __len__(self) -> int:
        return len(self.inv)

    def select(self, *fs: str) -> Iterator[Pair]:
        """The pairs whose invocation's f is one of ``fs``, in order, as dicts (made for
        those only): what a reader of a few kinds of calls iterates."""
        codes = [self.cols.fs.index(f) for f in fs if f in self.cols.fs]
        return map(self._pair, np.flatnonzero(np.isin(self.cols.f[self.inv], codes)).tolist())

    def _pair(self, j: int) -> Pair:
        op = self.cols.op
        d = self.done.item(j)
        return op(self.inv.item(j)), None if d < 0 else op(d)

    def __getitem__(self, i: Any) -> Any:
        return item_or_slice(i, len(self), self._pair, "pair")

    def __iter__(self) -> Iterator[Pair]:
        return map(self._pair, range(len(self)))


def column_pairs(history: Sequence[Op]) -> ColumnPairs:
    """:class:`ColumnPairs` of any history (:func:`as_columns`)."""
    h = as_columns(history)
    return ColumnPairs(h.clients, *h.client_pairs())


# -- fields by rows ------------------------------------------------------------------------

def _kinds(cols: Columns, name: str) -> list[str | None]:
    """The kind of field ``name`` (``"value.session"``, ``"error"``) in each shape (None:
    the shape has no such field)."""
    out: list[str | None] = []
    sub = name[6:] if name.startswith("value.") else None
    for shape in cols.shapes:
        kind = None
        for key, kd in shape:
            if sub is not None:
                if key == "value" and isinstance(kd, tuple):
                    kind = dict(kd).get(sub)
            elif key == name:
                kind = kd
        out.append(kind)
    return out


_KIND_CODES = {None: 0, INT: 1, FLOAT: 2, STR: 3, BOOL: 4, NULL: 5, OBJ: 6}


def values(cols: Columns, name: str, rows: np.ndarray, missing: Any = MISSING) -> list[Any]:
    """Field ``name`` of the ops at ``rows`` as Python objects, exactly as the ops' dicts hold
    them (``op.get(name)``, or ``op["value"].get(...)`` for ``"value.x"``); ``missing`` where
    the op has no such field (or no dict value). One object a row asked for, none for the
    others."""
    rows = np.asarray(rows, dtype=np.int64)
    kinds = _kinds(cols, name)
    code_of = np.array([_KIND_CODES[k] for k in kinds] or [0], dtype=np.int8)
    codes = code_of[cols.shape[rows]] if len(rows) else np.zeros(0, dtype=np.int8)
    present = np.unique(codes).tolist()
    if present == [0]:
        return [missing] * len(rows)
    out: list[Any] = [missing] * len(rows) if len(present) > 1 else []
    column = cols.fields.get(name)
    for code in present:
        if code == 0:
            continue
        sel = np.flatnonzero(codes == code) if len(present) > 1 else None
        at = rows if sel is None else rows[sel]
        if code == _KIND_CODES[NULL]:
            got: list[Any] = [None] * len(at)
        else:
            assert column is not None
            got = column[at].tolist()
            if code == _KIND_CODES[STR]:
                strings = cols.strings
                got = [strings[c] for c in got]
            elif code == _KIND_CODES[BOOL]:
                got = [bool(x) for x in got]
        if sel is None:
            return got
        for i, v in zip(sel.tolist(), got, strict=True):
            out[i] = v
    return out


def value_kinds(cols: Columns) -> np.ndarray:
    """Per op, what its ``value`` is: 0 no value, 1 null (or no dict, false), 2 an empty
    dict, 3 a dict with keys, 4 no dict, true (what ``bool(op.get("value"))`` and
    ``isinstance(..., dict)`` tell)."""
    per_shape = []
    for shape in cols.shapes:
        code = 0
        for key, kd in shape:
            if key == "value":
                code = 5 if kd == OBJ else 1 if not isinstance(kd, tuple) else (3 if kd else 2)
        per_shape.append(code)
    table = np.array(per_shape or [0], dtype=np.int8)
    out = table[cols.shape] if len(cols) else np.zeros(0, dtype=np.int8)
    if 5 in per_shape:
        rows = np.flatnonzero(out == 5)
        out[rows] = [4 if v else 1 for v in cols.fields["value"][rows].tolist()]
    return out


def has_field(cols: Columns, name: str) -> np.ndarray:
    """Per op, whether it has field ``name`` (of any kind)."""
    table = np.array([k is not None for k in _kinds(cols, name)] or [False], dtype=bool)
    return table[cols.shape] if len(cols) else np.zeros(0, dtype=bool)


def lock_words(cols: Columns, done: np.ndarray, inv: np.ndarray) -> list[str]:
    """``str(done.get("lock", inv.get("lock", "lock")))`` of each pair (``done`` -1: the
    invocation's, ``str(inv.get("lock", "lock"))``)."""
    has = np.array([any(key == "lock" for key, _ in shape) for shape in cols.shapes] or
                   [False], dtype=bool)[cols.shape] if len(cols) else np.zeros(0, dtype=bool)
    code = np.where(has, cols.lock, LOCK_ABSENT)  # (the columns hold an absent lock as null)
    d_code = np.where(done >= 0, code[np.maximum(done, 0)], LOCK_ABSENT)
    code = np.where(d_code != LOCK_ABSENT, d_code, code[inv])
    words = [str(x) for x in cols.locks]
    words[LOCK_ABSENT] = "lock"
    return [words[c] for c in code.tolist()]


# -- the lives' views by rows --------------------------------------------------------------

def _code(cols: Columns, f: str) -> int:
    """The code of function ``f`` (-1: no op has it)."""
    return cols.fs.index(f) if f in cols.fs else -1


def _types(cols: Columns, done: np.ndarray) -> np.ndarray:
    """Each completion's type code (255: never completed)."""
    return np.where(done >= 0, cols.type[np.maximum(done, 0)], 255)


def grants(paired: ColumnPairs, grant: Any) -> list[Any]:
    """:func:`checker.sessions.grants` of the column pairs, in order: ``grant``
    (:class:`checker.sessions.Grant`) made once a grant. By process, a grant ends at the next
    acquire or release its process invokes, unless that is an acquire that succeeds (the
    process let the old grant go without a word: it stays held)."""
    from harness.core.columns import TYPE_CODES, TYPE_NAMES, stable_order

    cols = paired.cols
    acq, rel = _code(cols, "acquire"), _code(cols, "release")
    if acq < 0:
        return []
    f = cols.f[paired.inv]
    sel = np.flatnonzero((f == acq) | (f == rel))
    inv, done = paired.inv[sel], paired.done[sel]
    is_acq = f[sel] == acq
    dtype = _types(cols, done)
    ok = is_acq & (dtype == TYPE_CODES["ok"])
    proc = cols.process[inv]
    order = stable_order(proc)
    nxt = np.full(len(sel), -1, dtype=np.int64)
    if len(order) > 1:
        same = proc[order[1:]] == proc[order[:-1]]
        nxt[order[:-1][same]] = order[1:][same]
    g = np.flatnonzero(ok)
    k = nxt[g]
    kk = np.maximum(k, 0)
    by_release = (k >= 0) & ~is_acq[kk]
    ends = by_release | ((k >= 0) & is_acq[kk] & ~ok[kk])
    g_inv, g_done = inv[g], done[g]
    time, index = cols.time, cols.index
    end_t = time[inv[kk]]
    names = [*TYPE_NAMES, None]
    rel_type = np.where(dtype[kk] == 255, len(TYPE_NAMES), dtype[kk])
    out = []
    for (p, session, lock, t0, t1, end, token, validity, release, i_done, i_rel, ended,
         released) in zip(
            proc[g].tolist(),
            values(cols, "value.session", g_done, None), lock_words(cols, g_done, g_inv),
            time[g_inv].tolist(), time[g_done].tolist(), end_t.tolist(),
            values(cols, "token", g_done, None), values(cols, "value.validity", g_done, None),
            rel_type.tolist(), index[g_done].tolist(), index[inv[kk]].tolist(),
            ends.tolist(), by_release.tolist(), strict=True):
        out.append(grant(p, session, lock, t0, t1, end if ended else None, token,
                         validity, names[release] if released else None,
                         [i_done, i_rel] if released else [i_done]))
    return out


def attempts(paired: ColumnPairs, attempt: Any, timeout_of: Any
             ) -> tuple[list[Any], list[tuple[int, Op]], bool]:
    """:meth:`checker.lives.Lives._own_attempts` of the column pairs: each acquire
    (``attempt``, :class:`checker.lives.Attempt`), each invocation that never completed
    ((process, its dict)), and whether some acquire has no timeout of its
    own. ``timeout_of``: :func:`checker.lives.timeout_of`, for a timeout that is no plain
    positive float (it refuses what is no duration)."""
    from harness.core.columns import TYPE_NAMES

    cols = paired.cols
    open_ = paired.inv[paired.done < 0]
    pending = [(p, cols.op(r)) for p, r in zip(cols.process[open_].tolist(), open_.tolist(),
                                               strict=True)]
    acq = _code(cols, "acquire")
    if acq < 0:
        return [], pending, False
    a = np.flatnonzero(cols.f[paired.inv] == acq)
    inv, done = paired.inv[a], paired.done[a]
    timeouts = values(cols, "value.timeout", inv, None)
    untimed = False
    inf = float("inf")
    for j, t in enumerate(timeouts):
        if t is None:
            untimed = True
        elif type(t) is not float or not 0 < t < inf:
            timeouts[j] = timeout_of(cols.op(inv.item(j)), None)
    names = [*TYPE_NAMES, None]
    dtype = _types(cols, done)
    outcome = np.where(dtype == 255, len(TYPE_NAMES), dtype).tolist()
    time = cols.time
    end = time[np.maximum(done, 0)].tolist()
    out = [attempt(p, lock, t0, None if d < 0 else t1, names[o], t)
           for p, lock, t0, t1, d, o, t in zip(
               cols.process[inv].tolist(), lock_words(cols, done, inv),
               time[inv].tolist(), end, done.tolist(), outcome, timeouts, strict=True)]
    return out, pending, untimed


def last_ops(cols: Columns, processes: Sequence[int]) -> dict[int, tuple[int, Op]]:
    """Each of these processes' latest op in the columns (the first at its latest time) and
    that time: what :meth:`checker.lives.Lives._end_at_crashes` compares with its crash."""
    out: dict[int, tuple[int, Op]] = {}
    if not processes or not len(cols):
        return out
    want = np.array(sorted(set(processes)), dtype=np.int64)
    rows = np.flatnonzero(np.isin(cols.process, want))
    if not len(rows):
        return out
    order = rows[np.lexsort((rows, -cols.time[rows], cols.process[rows]))]
    first = np.ones(len(order), dtype=bool)
    first[1:] = cols.process[order[1:]] != cols.process[order[:-1]]
    for r in order[first].tolist():
        out[cols.process.item(r)] = (cols.time.item(r), cols.op(r))
    return out


def truthy(cols: Columns, name: str, rows: np.ndarray) -> np.ndarray:
    """``bool(value)`` of field ``name`` of the ops at ``rows`` (False where it is absent)."""
    rows = np.asarray(rows, dtype=np.int64)
    kinds = _kinds(cols, name)
    code_of = np.array([_KIND_CODES[k] for k in kinds] or [0], dtype=np.int8)
    codes = code_of[cols.shape[rows]] if len(rows) else np.zeros(0, dtype=np.int8)
    out = np.zeros(len(rows), dtype=bool)
    column = cols.fields.get(name)
    if column is None:
        return out
    x = column[rows]
    numeric = (codes == _KIND_CODES[INT]) | (codes == _KIND_CODES[FLOAT]) | (
        codes == _KIND_CODES[BOOL])
    out[numeric] = x[numeric] != 0
    text = codes == _KIND_CODES[STR]
    if text.any():
        nonempty = np.array([bool(s) for s in cols.strings] or [False], dtype=bool)
        out[text] = nonempty[x[text].astype(np.int64)]
    held = codes == _KIND_CODES[OBJ]
    out[held] = [bool(v) for v in x[held].tolist()]
    return out


def writes(paired: ColumnPairs, entry: Any) -> tuple[list[Any], int]:
    """:func:`checker.sessions.resource_log`'s writes of the column pairs, without the final
    read: each write known from its completion (``entry``: :class:`checker.sessions.Entry`),
    and how many are not known."""
    from harness.core.columns import TYPE_CODES

    cols = paired.cols
    w = _code(cols, "write")
    if w < 0:
        return [], 0
    sel = np.flatnonzero(cols.f[paired.inv] == w)
    inv, done = paired.inv[sel], paired.done[sel]
    kinds = value_kinds(cols)
    has_done = done >= 0
    d = np.maximum(done, 0)
    # (done or {}).get("value") or inv.get("value") or {}: a dict with keys, else none
    dv = np.where(has_done, kinds[d], 0)  # (a value no dict, truthy: no seq in it)
    src = np.where(dv == 3, d, np.where((dv != 4) & (kinds[inv] == 3), inv, -1))
    has_seq = (src >= 0) & has_field(cols, "value.seq")[np.maximum(src, 0)]
    dtype = _types(cols, done)
    known = has_done & (dtype != TYPE_CODES["info"]) & has_seq
    unknown = int(len(sel) - known.sum())
    known &= (dtype == TYPE_CODES["ok"]) | (dtype == TYPE_CODES["fail"])
    k = np.flatnonzero(known)
    src_k, inv_k = src[k], inv[k]
    out = [entry(int(seq), p, session, str(kind), token, accepted, lock=lock)
           for seq, p, session, kind, token, accepted, lock in zip(
               values(cols, "value.seq", src_k),
               cols.process[inv_k].tolist(), values(cols, "value.session", src_k, None),
               values(cols, "value.kind", src_k, None), values(cols, "token", inv_k, None),
               (dtype[k] == TYPE_CODES["ok"]).tolist(),
               lock_words(cols, np.full(len(k), -1, dtype=np.int64), inv_k), strict=True)]
    return out, unknown


def latencies(paired: ColumnPairs) -> dict[str, list[float]]:
    """Per f, ``(done["time"] - inv["time"]) / 1e6`` of each call of the columns that
    completed ok (the same floats: an int64 made a double, divided)."""
    from harness.core.columns import TYPE_CODES

    cols = paired.cols
    ok = np.flatnonzero(_types(cols, paired.done) == TYPE_CODES["ok"])
    inv, done = paired.inv[ok], paired.done[ok]
    f = cols.f[inv]
    ms = (cols.time[done] - cols.time[inv]) / 1e6
    out: dict[str, list[float]] = {}
    for code in np.flatnonzero(np.bincount(f, minlength=len(cols.fs))).tolist():
        out[cols.fs[code]] = ms[f == code].tolist()
    return out


def refused_releases(paired: ColumnPairs) -> list[Pair]:
    """Each release of the columns that failed, as dicts."""
    from harness.core.columns import TYPE_CODES

    cols = paired.cols
    rel = _code(cols, "release")
    if rel < 0:
        return []
    sel = np.flatnonzero((_types(cols, paired.done) == TYPE_CODES["fail"])
                         & (cols.f[paired.inv] == rel))
    return [(cols.op(i), cols.op(d)) for i, d in zip(
        paired.inv[sel].tolist(), paired.done[sel].tolist(), strict=True)]


def count_types(cols: Columns) -> dict[str, dict[str, int]]:
    """Ops by f, then type, each f in the order of its first op."""
    from harness.core.columns import TYPE_NAMES

    if not len(cols):
        return {}
    n_types = len(TYPE_NAMES)
    counts = np.bincount(cols.f.astype(np.int64) * n_types + cols.type,
                         minlength=len(cols.fs) * n_types).reshape(-1, n_types).tolist()
    codes, first = np.unique(cols.f, return_index=True)
    return {cols.fs[code]: dict(zip(TYPE_NAMES, counts[code], strict=True))
            for _, code in sorted(zip(first.tolist(), codes.tolist(), strict=True))}


def written_tokens(paired: ColumnPairs) -> list[tuple[int, Any, str | None]]:
    """(invocation time, token, outcome: the completion's type, None: never completed) of
    each write of the columns whose invocation carries a token that is not null."""
    from harness.core.columns import TYPE_NAMES

    cols = paired.cols
    w = _code(cols, "write")
    if w < 0:
        return []
    sel = np.flatnonzero(cols.f[paired.inv] == w)
    inv, done = paired.inv[sel], paired.done[sel]
    tokens = values(cols, "token", inv, None)
    keep = [j for j, tok in enumerate(tokens) if tok is not None]
    names = [*TYPE_NAMES, None]
    dtype = _types(cols, done)
    outcome = np.where(dtype == 255, len(TYPE_NAMES), dtype)
    at = np.array(keep, dtype=np.int64)
    return list(zip(cols.time[inv[at]].tolist(), [tokens[j] for j in keep],
                    [names[c] for c in outcome[at].tolist()], strict=True))


def increments(paired: ColumnPairs) -> tuple[int, int]:
    """:class:`checker.lost_updates.LostUpdatesChecker`'s counts of the columns' writes of
    kind ``increment``: (acknowledged, unknown)."""
    from harness.core.columns import TYPE_CODES

    cols = paired.cols
    w = _code(cols, "write")
    if w < 0:
        return 0, 0
    sel = np.flatnonzero(cols.f[paired.inv] == w)
    odd = paired.inv[sel][value_kinds(cols)[paired.inv[sel]] == 4]
    if len(odd):  # (no kind can be read from it: no verdict either)
        r = odd.item(0)
        raise TypeError(f"process {cols.process.item(r)}'s write at index {cols.index.item(r)}"
                        f" has value {cols.fields['value'][r]!r}: no object, so no kind")
    kinds = values(cols, "value.kind", paired.inv[sel], None)
    inc = np.array([k == "increment" for k in kinds], dtype=bool)
    dtype = _types(cols, paired.done[sel])[inc]
    return (int((dtype == TYPE_CODES["ok"]).sum()),
            int(((dtype == 255) | (dtype == TYPE_CODES["info"])).sum()))
