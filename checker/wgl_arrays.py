"""The entry lists of a big part's search (:class:`checker.wgl.Part`) made by array operations:
the same lists its walk of the sorted events makes, in a fraction of the time (a part of 100k
calls, the core of an invalid lock history, took 0.2 s to sort and walk in Python).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from checker.calls import Call


class Entries(NamedTuple):
    """What :meth:`checker.wgl.Part._build_lists` makes (see there), as lists."""

    tail: int
    entry_op: list[int]
    is_call: list[bool]
    entry_pos: list[int]
    call_entry: list[int]
    return_entry: list[int]
    known: list[Call]
    unknown: list[Call]
    info_at: list[int]
    events: int


_START, _END, _SEQ, _KNOWN = (attrgetter(k) for k in ("start", "end", "seq", "known"))
_INT = {int}


def entry_lists(calls: Sequence[Call]) -> Entries | None:
    """The entries of ``calls`` as the walk makes them: the events (each call's invocation,
    and its completion when known) in the order of (time, invocation before completion, seq),
    a stable sort of them in the calls' order, as ``list.sort`` sorts them; None where the
    arrays cannot hold them (a time or seq no int64, a completion before its invocation: the
    walk then says what is wrong) or ``seq`` is not unique (the walk numbers ops by it)."""
    n = len(calls)
    known = np.fromiter(map(bool, map(_KNOWN, calls)), bool, n)
    where = np.flatnonzero(known)
    starts, seqs = list(map(_START, calls)), list(map(_SEQ, calls))
    ends = list(map(_END, map(calls.__getitem__, where.tolist())))
    if not set(map(type, starts)) | set(map(type, ends)) | set(map(type, seqs)) <= _INT:
        return None  # (a float, a bool, ...: not as the walk compares it)
    try:
        start, end, seq = (np.array(x, np.int64) for x in (starts, ends, seqs))
    except OverflowError:
        return None
    del starts, ends, seqs
    if bool(np.any(end < start[where])) or not (
            bool(np.all(seq[1:] > seq[:-1])) or len(np.unique(seq)) == n):  # (usually sorted)
        return None
    m = len(where)
    # The events in the calls' order: each call's invocation, then its completion if known.
    first = np.arange(n) + np.cumsum(known) - known  # where each call's invocation is
    total = n + m
    time = np.empty(total, np.int64)
    kind = np.zeros(total, np.int8)
    owner = np.empty(total, np.int64)  # the call of each event
    time[first] = start
    owner[first] = np.arange(n)
    done = first[where] + 1
    time[done] = end
    kind[done] = 1
    owner[done] = where
    event_seq = seq[owner]
    order = np.lexsort((event_seq, kind, time))  # (stable, the last key first)
    owner = owner[order]
    kind = kind[order]
    del time, event_seq, order
    is_known = known[owner]
    info_at = np.flatnonzero(~is_known)
    pos = np.flatnonzero(is_known)  # entry e (1..2m) is the event at pos[e - 1]
    call = kind[pos] == 0
    known_calls = owner[pos[call]]  # the known ops, numbered in call order
    number = np.empty(n, np.int64)
    number[known_calls] = np.arange(m)
    entry_number = number[owner[pos]]
    return_entry = np.empty(m, np.int64)
    return_entry[entry_number[~call]] = np.flatnonzero(~call) + 1
    get = calls.__getitem__
    return Entries(
        tail=2 * m + 1,
        entry_op=[-1, *entry_number.tolist(), -1],
        is_call=[False, *call.tolist(), False],
        entry_pos=[0, *pos.tolist(), total],
        call_entry=(np.flatnonzero(call) + 1).tolist(),
        return_entry=return_entry.tolist(),
        known=list(map(get, known_calls.tolist())),
        unknown=list(map(get, owner[info_at].tolist())),
        info_at=info_at.tolist(),
        events=total)
