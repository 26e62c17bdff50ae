"""Derived views of a lock history shared by the checkers: grants (lock sessions as the clients
saw them) and the resource log (what the protected resource did, in its own order).

Pure functions of the history.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from harness.core.checks import derive, is_columns
from harness.core.history import FAIL, INFO, INVOKE, OK, Op, pairs, seconds
from harness.core.history_parts import last_time


@dataclass(slots=True)
class Grant:
    """One successful acquire and what its process did until it let go.

    ``start``: when the process learnt it held the lock (the acquire's ok).
    ``end``: when it stopped believing so (it invoked release), or None: it never did, so it
    believed it held the lock to the end of the history. ``crashed``: its process died
    holding it, and ``end`` is the crash (set by :class:`checker.lives.Lives`, which every
    checker reads).
    """

    process: int
    session: int | None
    lock: str
    invoke: int
    start: int
    end: int | None
    token: int | None
    validity: float | None
    release: str | None = None  # ok / fail / info / None (never released)
    ops: list[int] = field(default_factory=list)
    crashed: bool = False

    def end_or(self, horizon: int) -> int:
        return horizon if self.end is None else self.end

    def key(self) -> tuple[int, int | None]:
        return (self.process, self.session)

    def describe(self) -> str:
        tok = "" if self.token is None else f" with token {self.token}"
        return f"process {self.process} (acquired at {seconds(self.start):.2f} s{tok})"


class Entry(NamedTuple):
    """One write as the resource recorded it (a tuple: cheap to build by the million)."""

    seq: int
    process: int
    session: int | None
    kind: str
    token: int | None
    accepted: bool
    known: bool = True  # False: an indeterminate write whose fate the history cannot tell
    lock: str = "lock"  # the key whose data it is (each lock guards its own)


Pairs = list[tuple[Op, "Op | None"]]


def client_ops(history: Sequence[Op]) -> list[Op]:
    return [op for op in history if isinstance(op.get("process"), int)]


def client_pairs(history: Sequence[Op]) -> Pairs:
    """The client processes' invocations with their completions (:func:`pairs` of
    :func:`client_ops`, without the list between): once per shared history
    (:func:`harness.core.checks.derive`), for every reader, who never changes it. For a
    history in columns whose columns are well-formed, a
    :class:`checker.column_pairs.ColumnPairs`: the same pairs, held as rows."""
    return derive(history, client_pairs, lambda: _client_pairs(history))


def _client_pairs(history: Sequence[Op]) -> Pairs:
    cols = columns_of_history(history)
    if cols is not None:
        from checker.column_pairs import column_pairs

        return column_pairs(history)  # type: ignore[arg-type,return-value]
    return list(pairs(history, clients=True))


columnar = is_columns  # a history in columns?


def columns_of_history(history: Any) -> Any:
    """The columns of a ColumnHistory when they are well-formed (per process, invoke and
    completion alternate: their pairs are rows), else None: the caller reads dicts."""
    if not columnar(history):
        return None
    from harness.core.checks import WELL_FORMED

    ok = history.derived.get(WELL_FORMED) or derive(history, _WELL_FORMED_COLUMNS,
                                                    lambda: _columns_well_formed(history))
    return history.clients if ok else None


_WELL_FORMED_COLUMNS = "columns well-formed"


def _columns_well_formed(history: Any) -> bool:
    from harness.core.columns import well_formed

    return well_formed(history.clients)


horizon = last_time  # the history's last time (0 when empty), from its columns when it has them


def grants(history: Sequence[Op], paired: Pairs | None = None) -> list[Grant]:
    """Every acquire that completed ok, with the end of its process's belief. ``paired``:
    :func:`client_pairs` of the history, when the caller has it already."""
    paired = client_pairs(history) if paired is None else paired
    rows = column_pairs_of(paired)
    if rows is None:
        return _grants(paired)
    from checker.column_pairs import grants as column_grants
    from checker.column_pairs import merged

    extra = [pair for _, pair in rows.extra]
    made = _grants(extra)
    at = [pos for pos, (inv, done) in rows.extra if inv["f"] == "acquire" and done is not None
          and done["type"] == OK]
    return merged(column_grants(rows, Grant), list(zip(at, made, strict=True)))


def column_pairs_of(paired: Any) -> Any:
    """``paired`` when it is a :class:`checker.column_pairs.ColumnPairs` (rows), else None."""
    module = sys.modules.get("checker.column_pairs")
    return paired if module is not None and isinstance(paired, module.ColumnPairs) else None


def _grants(paired: Iterable[tuple[Op, Op | None]]) -> list[Grant]:
    out: list[Grant] = []
    add = out.append
    open_: dict[int, Grant] = {}
    let_go = open_.pop
    for inv, done in paired:
        f = inv["f"]
        if f == "acquire":
            if done is not None and done["type"] == OK:
                value = done.get("value")
                session = validity = None
                if isinstance(value, dict):
                    session, validity = value.get("session"), value.get("validity")
                p = inv["process"]
                g = Grant(p, session, str(done.get("lock", inv.get("lock", "lock"))),
                          inv["time"], done["time"], None, done.get("token"), validity, None,
                          [done.get("index", -1)])
                add(g)
                open_[p] = g
            elif (g := let_go(inv["process"], None)) is not None:
                # A new acquire without a release: the process let go of the old grant silently.
                g.end = inv["time"]
        elif f == "release" and (g := let_go(inv["process"], None)) is not None:
            g.end = inv["time"]
            g.release = None if done is None else done["type"]
            g.ops.append(inv.get("index", -1))
    return out


def final_read(history: Sequence[Op]) -> list[dict[str, Any]] | None:
    """The resource's own log, read back at the end of the run (None if the run never got there)."""
    for op in reversed(_dicts(history)):
        if op.get("f") == "read" and op.get("type") == OK and isinstance(op.get("value"), list):
            return op["value"]
    return None


def writes_in_lock_transaction(history: Sequence[Op]) -> bool:
    """Did every write go through the lock's own transaction (``pg-row``,
    ``pg-advisory-xact``)? Then the writes commit with the lock or not at all: a holder whose
    session the server ended lost its writes with it, and the resource's log decides."""
    return derive(history, writes_in_lock_transaction, lambda: _in_lock_transaction(history))


def _dicts(history: Sequence[Op]) -> Sequence[Op]:
    """The ops of ``history`` that may hold a list or a dict in a field: all of them, but
    for a history in columns, its ``others`` (no column holds one)."""
    return history.others if columnar(history) else history  # type: ignore[attr-defined]


def _in_lock_transaction(history: Sequence[Op]) -> bool:
    """:func:`writes_in_lock_transaction`: over the client pairs (every client invoke is one
    of their invocations), ended by the first write outside."""
    paired = client_pairs(history)
    rows = column_pairs_of(paired)
    if rows is None:
        return _all_in_lock_transaction(paired)
    from checker.column_pairs import truthy
    from harness.core.columns import TYPE_CODES

    cols = rows.cols
    found = False
    if "write" in cols.fs:
        w = rows.inv[cols.f[rows.inv] == cols.fs.index("write")]
        w = w[cols.type[w] == TYPE_CODES[INVOKE]]  # (a lone completion is its own pair)
        if len(w):
            if not bool(truthy(cols, "value.in_lock_tx", w).all()):
                return False
            found = True
    return _all_in_lock_transaction([pair for _, pair in rows.extra], found)


def _all_in_lock_transaction(paired: Iterable[tuple[Op, Op | None]], found: bool = False
                             ) -> bool:
    for inv, _done in paired:
        if inv["f"] == "write" and inv["type"] == INVOKE:
            value = inv.get("value")
            if not (isinstance(value, dict) and value.get("in_lock_tx")):
                return False
            found = True
    return found


def final_state(history: Sequence[Op]) -> dict[str, Any] | None:
    """The resource's final state (counter, balance, keys, ...), read back after its log."""
    for op in reversed(_dicts(history)):
        value = op.get("value")
        if (op.get("f") == "read" and op.get("type") == OK and isinstance(value, dict)
                and isinstance(value.get("state"), dict)):
            return value["state"]
    return None


def resource_log(history: Sequence[Op], paired: Pairs | None = None
                 ) -> tuple[list[Entry], int]:
    """The resource's writes in its own order, and how many writes remain indeterminate.

    With the final read, every write is known, the indeterminate ones included. Without it (a
    run that was killed), writes that completed ok or were rejected are known from their
    completions; a write that timed out or never completed may or may not have happened.
    Once per shared history (:func:`harness.core.checks.derive`; ``paired``, the history's
    :func:`client_pairs` when the caller has them, changes nothing of the result).
    """
    return derive(history, resource_log, lambda: _resource_log(history, paired))


def _resource_log(history: Sequence[Op], paired: Pairs | None) -> tuple[list[Entry], int]:
    log = final_read(history)
    if log is None and (rows := column_pairs_of(client_pairs(history) if paired is None
                                                else paired)) is not None:
        from checker.column_pairs import merged, writes

        col_entries, col_unknown = writes(rows, Entry)
        extra, unknown = _writes([pair for _, pair in rows.extra])
        at = [pos for pos, (inv, done) in rows.extra if inv["f"] == "write"
              and done is not None and done["type"] in (OK, FAIL)
              and "seq" in ((done or {}).get("value") or inv.get("value") or {})]
        entries = merged(col_entries, list(zip(at, extra, strict=True)))
        return sorted(entries, key=lambda e: e.seq), col_unknown + unknown
    if log is not None:
        entries = [
            Entry(int(e["seq"]), int(e["process"]), e.get("session"), str(e.get("kind")),
                  e.get("token"), bool(e.get("accepted")), lock=str(e.get("lock", "lock")))
            for e in log
        ]
        entries.sort(key=lambda e: e.seq)  # the log is in seq order already: linear
        return entries, 0
    entries, unknown = _writes(client_pairs(history) if paired is None else paired)
    return sorted(entries, key=lambda e: e.seq), unknown


def _writes(paired: Iterable[tuple[Op, Op | None]]) -> tuple[list[Entry], int]:
    """The writes known from their completions, in the pairs' order, and how many are not."""
    entries = []
    unknown = 0
    for inv, done in paired:
        if inv["f"] != "write":
            continue
        value = (done or {}).get("value") or inv.get("value") or {}
        if done is None or done["type"] == INFO or "seq" not in value:
            unknown += 1
            continue
        if done["type"] in (OK, FAIL):
            entries.append(Entry(int(value["seq"]), inv["process"], value.get("session"),
                                 str(value.get("kind")), inv.get("token"), done["type"] == OK,
                                 lock=str(inv.get("lock", "lock"))))
    return entries, unknown


def entries_by_lock(entries: list[Entry]) -> list[list[Entry]]:
    """The resource's writes of each lock (key), each list in the resource's order."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.lock, []).append(e)
    return list(out.values())


def by_lock(items: list[Grant]) -> dict[str, list[Grant]]:
    out: dict[str, list[Grant]] = {}
    for g in items:
        out.setdefault(g.lock, []).append(g)
    return out


def count_types(history: Sequence[Op]) -> dict[str, dict[str, int]]:
    """Client ops by f, then type (f in order of first appearance). Counted in C by (process,
    f, type), then summed over the client processes (an op without those fields: op by op).
    A history in columns: the columns' by f and type, the others' (the final read) so."""
    if columnar(history):
        return _count_columns(history)
    return _count_types(history)


def _count_columns(history: Any) -> dict[str, dict[str, int]]:
    from checker.column_pairs import count_types as count_columns

    others = _count_types(history.others)
    firsts: dict[str, int] = {}
    for op in history.others:
        if isinstance(op.get("process"), int):
            firsts.setdefault(op["f"], op["index"])
    got = count_columns(history.clients)
    for f, c in others.items():
        mine = next((x for x in got if x[1] == f), None)
        if mine is None:
            got.append((firsts[f], f, c))
            continue
        both = mine[2]
        for t, n in c.items():
            both[t] = both.get(t, 0) + n
        if firsts[f] < mine[0]:
            got[got.index(mine)] = (firsts[f], f, both)
    got.sort(key=lambda x: x[0])
    return {f: c for _, f, c in got}


def _count_types(history: Sequence[Op]) -> dict[str, dict[str, int]]:
    try:
        seen = Counter(map(_FIELDS, history))
    except KeyError:
        seen = Counter((op["process"], op["f"], op["type"]) for op in history
                       if isinstance(op.get("process"), int))
    counts: dict[str, dict[str, int]] = {}
    for (p, f, t), n in seen.items():  # first appearance first: the order of the ops
        if not isinstance(p, int):
            continue
        c = counts.get(f)
        if c is None:
            c = counts[f] = {INVOKE: 0, OK: 0, FAIL: 0, INFO: 0}
        c[t] = c.get(t, 0) + n
    return counts


_FIELDS = itemgetter("process", "f", "type")
