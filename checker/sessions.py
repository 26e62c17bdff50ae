"""Derived views of a lock history shared by the checkers: grants (lock sessions as the clients
saw them) and the resource log (what the protected resource did, in its own order).

Pure functions of the history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from harness.core.checks import derive
from harness.core.history import FAIL, INFO, INVOKE, OK, Op, pairs, seconds


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
    (:func:`harness.core.checks.derive`), for every reader, who never changes it."""
    return derive(history, client_pairs, lambda: list(pairs(history, clients=True)))


def horizon(history: Sequence[Op]) -> int:
    return max((op["time"] for op in history), default=0)


def grants(history: Sequence[Op], paired: Pairs | None = None) -> list[Grant]:
    """Every acquire that completed ok, with the end of its process's belief. ``paired``:
    :func:`client_pairs` of the history, when the caller has it already."""
    out: list[Grant] = []
    add = out.append
    open_: dict[int, Grant] = {}
    let_go = open_.pop
    for inv, done in (client_pairs(history) if paired is None else paired):
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
    for op in reversed(history):
        if op.get("f") == "read" and op.get("type") == OK and isinstance(op.get("value"), list):
            return op["value"]
    return None


def writes_in_lock_transaction(history: Sequence[Op]) -> bool:
    """Did every write go through the lock's own transaction (``pg-row``,
    ``pg-advisory-xact``)? Then the writes commit with the lock or not at all: a holder whose
    session the server ended lost its writes with it, and the resource's log decides."""
    return derive(history, writes_in_lock_transaction, lambda: _in_lock_transaction(history))


def _in_lock_transaction(history: Sequence[Op]) -> bool:
    """:func:`writes_in_lock_transaction`: over the client pairs (every client invoke is one
    of their invocations), ended by the first write outside."""
    found = False
    for inv, _done in client_pairs(history):
        if inv["f"] == "write" and inv["type"] == INVOKE:
            value = inv.get("value")
            if not (isinstance(value, dict) and value.get("in_lock_tx")):
                return False
            found = True
    return found


def final_state(history: Sequence[Op]) -> dict[str, Any] | None:
    """The resource's final state (counter, balance, keys, ...), read back after its log."""
    for op in reversed(history):
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
    if log is not None:
        entries = [
            Entry(int(e["seq"]), int(e["process"]), e.get("session"), str(e.get("kind")),
                  e.get("token"), bool(e.get("accepted")), lock=str(e.get("lock", "lock")))
            for e in log
        ]
        entries.sort(key=lambda e: e.seq)  # the log is in seq order already: linear
        return entries, 0
    entries = []
    unknown = 0
    for inv, done in (client_pairs(history) if paired is None else paired):
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
    return sorted(entries, key=lambda e: e.seq), unknown


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
    f, type), then summed over the client processes (an op without those fields: op by op)."""
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
