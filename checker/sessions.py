"""Derived views of a lock history shared by the checkers: grants (lock sessions as the clients
saw them) and the resource log (what the protected resource did, in its own order).

Pure functions of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from harness.core.checks import derive, is_columns
from harness.core.history import INVOKE, OK, Op, seconds
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


def client_pairs(history: Sequence[Op]) -> Any:
    """The client processes' invocations with their completions, in the order of the
    invocations: a :class:`checker.column_pairs.ColumnPairs` of the history in columns
    (:func:`checker.column_pairs.as_columns`, the one entry of any history), once per shared
    history (:func:`harness.core.checks.derive`), for every reader, who never changes it."""
    from checker.column_pairs import column_pairs

    return derive(history, client_pairs, lambda: column_pairs(history))


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


def grants(history: Sequence[Op]) -> list[Grant]:
    """Every acquire that completed ok, with the end of its process's belief."""
    from checker.column_pairs import grants as column_grants

    return column_grants(client_pairs(history), Grant)


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
    """:func:`writes_in_lock_transaction`: every write invoked in the lock's transaction, and
    one at least."""
    from checker.column_pairs import truthy
    from harness.core.columns import TYPE_CODES

    rows = client_pairs(history)
    cols = rows.cols
    if "write" not in cols.fs:
        return False
    w = rows.inv[cols.f[rows.inv] == cols.fs.index("write")]
    w = w[cols.type[w] == TYPE_CODES[INVOKE]]
    return bool(len(w)) and bool(truthy(cols, "value.in_lock_tx", w).all())


def final_state(history: Sequence[Op]) -> dict[str, Any] | None:
    """The resource's final state (counter, balance, keys, ...), read back after its log."""
    for op in reversed(_dicts(history)):
        value = op.get("value")
        if (op.get("f") == "read" and op.get("type") == OK and isinstance(value, dict)
                and isinstance(value.get("state"), dict)):
            return value["state"]
    return None


def resource_log(history: Sequence[Op]) -> tuple[list[Entry], int]:
    """The resource's writes in its own order, and how many writes remain indeterminate.

    With the final read, every write is known, the indeterminate ones included. Without it (a
    run that was killed), writes that completed ok or were rejected are known from their
    completions; a write that timed out or never completed may or may not have happened.
    Once per shared history (:func:`harness.core.checks.derive`).
    """
    return derive(history, resource_log, lambda: _resource_log(history))


def _resource_log(history: Sequence[Op]) -> tuple[list[Entry], int]:
    log = final_read(history)
    if log is None:
        from checker.column_pairs import writes

        entries, unknown = writes(client_pairs(history), Entry)
        return sorted(entries, key=lambda e: e.seq), unknown
    entries = [
        Entry(int(e["seq"]), int(e["process"]), e.get("session"), str(e.get("kind")),
              e.get("token"), bool(e.get("accepted")), lock=str(e.get("lock", "lock")))
        for e in log
    ]
    entries.sort(key=lambda e: e.seq)  # the log is in seq order already: linear
    return entries, 0


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
    """Client ops by f, then type (f in order of first appearance), counted in the columns."""
    from checker.column_pairs import as_columns
    from checker.column_pairs import count_types as count_columns

    return count_columns(as_columns(history).clients)
