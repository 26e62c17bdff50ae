"""Well-formedness: the stage between reading a history and checking it (as Knossos and Jepsen
validate a history before any model runs). Past it, checkers may trust their input.

Each op has already passed :func:`harness.core.history.validate_op` (fields of their types, no
duplicate key, no lone surrogate); this stage checks what only the whole history shows:

- per client process (an int), invoke and completion alternate: a second invoke before the
  first completed, or a completion with no invoke, is malformed. Our client processes are never
  restarted under the same number, so a crashed client's last invoke simply stays open (its
  process never invokes again), as the history contract says;
- a completion's ``f`` and ``lock`` are its invoke's;
- times do not go backwards within a process;
- indexes are unique;
- client ops (``acquire``, ``read``, ``cas``, ...) only from client processes;
- one life per process: no op of a client after the nemesis recorded its crash
  (``detail.crashed`` with the client among its targets, as ``crash-client`` writes it).

The nemesis process is exempt from alternation: its lanes (a background fault beside the
schedule's) overlap, and a fault that could not start is recorded as an ``info`` alone.

Pure; one pass; a violation is a :class:`~harness.core.history.HistoryError` naming the place
(the file and line, as the reader knows it) and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter

from harness.core.history import INVOKE, HistoryError, Op
from harness.core.text import show

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

# The functions of client ops: every model's and every workload's. A nemesis op with one of
# these names is a client op recorded under the wrong process.
CLIENT_FS = frozenset({"acquire", "release", "extend", "read", "write", "cas"})


def problem(history: Sequence[Op], *, ordered: bool = False) -> tuple[int, str] | None:
    """The first violation: (position of the op in ``history``, the rule and what broke it), or
    None when the history is well-formed. ``ordered``: the caller has checked already that
    times never go backwards in the whole history (a JSONL reader does), so not per process."""
    open_: dict[Any, int] = {}  # a client process's open invoke, by its position
    last: dict[Any, int] = {}  # a client process's latest time
    fields = itemgetter("process", "f", "time", "type")  # one call for four lookups
    opened, closed = open_.get, open_.pop
    dead: dict[int, int] = {}  # a crashed client process -> the position of its crash record
    prev = -1
    increasing = True  # indexes in increasing order (every history we write): unique for free
    for i, op in enumerate(history):
        p, f, t, kind = fields(op)
        if increasing:
            idx = op.get("index", prev + 1)
            if idx <= prev:
                increasing = False
            prev = idx
        if type(p) is not int:
            if f in CLIENT_FS:
                return i, (f"client op from a non-client process: {show(f)} from process "
                           f"{show(p)}")
            detail = op.get("detail")
            if type(detail) is dict and detail.get("crashed") is True and kind != INVOKE:
                for c in crashed_clients(op):
                    dead.setdefault(c, i)
            continue
        if p in dead:
            j = dead[p]
            return i, (f"an op after its process crashed: process {p}'s {kind} {show(f)} comes "
                       f"after the record of its crash (index {history[j].get('index', j)}); "
                       "a process has one life")
        if not ordered:
            before = last.get(p)
            if before is not None and t < before:
                return i, (f"time goes backwards in a process: process {p} at {t} ns after "
                           f"{before} ns")
            last[p] = t
        if kind == INVOKE:
            j = opened(p)
            if j is not None:
                return i, (f"invoke before the last completed: process {p} invokes {show(f)} "
                           f"while its {show(history[j]['f'])} (index "
                           f"{history[j].get('index', j)}) has no completion")
            open_[p] = i
            continue
        j = closed(p, None)
        if j is None:
            return i, (f"completion without an invoke: {kind} {show(f)} of process {p} "
                       "completes nothing it invoked")
        inv = history[j]
        if inv["f"] != f:
            return i, (f"completion's f differs from its invoke's: {kind} {show(f)} of "
                       f"process {p} completes {show(inv['f'])} (index {inv.get('index', j)})")
        if inv.get("lock") != op.get("lock"):
            return i, (f"completion's lock differs from its invoke's: {show(op.get('lock'))} "
                       f"completes a call on {show(inv.get('lock'))} (process {p})")
    if not increasing:
        seen: dict[Any, int] = {}
        for i, op in enumerate(history):
            idx = op.get("index")
            if idx is None:
                continue
            if idx in seen:
                return i, f"duplicate index: {idx} again (first at op {seen[idx] + 1})"
            seen[idx] = i
    return None


def crashed_clients(op: Op) -> list[int]:
    """The client processes a crash record names (its targets ``c3`` -> 3)."""
    from harness.core.cluster import client_of  # only for a crash: a check of others pays nothing

    return [c for t in op.get("targets") or [] if (c := client_of(t)) is not None]


def require(history: Sequence[Op], place: Callable[[int], str], *, ordered: bool = False
            ) -> None:
    """Raise :class:`HistoryError` ``"<place>: malformed history: <rule>"`` for the first
    violation; ``place(i)`` names where the ``i``-th op was read (a file and its line)."""
    found = problem(history, ordered=ordered)
    if found is not None:
        i, why = found
        raise HistoryError(f"{place(i)}: malformed history: {why}")


def require_checked(history: Sequence[Op], *, ordered: bool = False) -> None:
    """:func:`require` for a history held in memory (a live run's merged history: one op a
    line of its ``history.jsonl``); ``ordered``: its times never go backwards (merged)."""
    require(history, lambda i: f"history.jsonl line {i + 1}", ordered=ordered)
