"""A lock's part held in arrays (:class:`checker.calls.Paired`), decided as
:func:`checker.lockorder.check_part` decides it with a call object an op, but by array
operations: the valid verdict (the common case), and the invalid one with its witness, which
makes objects only of the few calls the search and the witness read.

Where the part's shape is the plainest: no extend and no refused op; each process's ops with
a known outcome begin with an acquire and have no release right after a release (an acquire
after an acquire: granted again while held), at most one release of unknown outcome after
them all, and no op invoked the instant the one before it completed (but an acquire right at
the completion of a release or an acquire: :func:`checker.lockorder._tie_is_moot`). Then
:func:`checker.lockorder.plan` makes a section of each known acquire (start its invocation,
deadline its completion, end the invocation of the process's next known op if that is a
release, or of the unknown release after them all, else none). Anything else: None, and the
part is checked with its calls as objects, as any other.

Pure: no I/O; the only clock is ``time.monotonic``, read for the search's time budget.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numpy as np

from checker.calls import Call, CallRows, Paired
from checker.lockorder import WINDOW_STATES, WINDOW_TIME_S, _remaining, _unexpected, applies
from checker.models import Model, State
from checker.wgl import INVALID, VALID, Budget, Part, PartResult
from checker.witness import (
    CONCURRENT_ROWS,
    LINEARIZATION_ROWS,
    assemble,
    explain,
    last_change,
)
from harness.core.columns import stable_order
from harness.core.heap import give_back

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

BIG = np.iinfo(np.int64).max  # "no end": no time is that late (one that is: not this shape)
SMALL = np.iinfo(np.int64).min  # before any end


class Sections(NamedTuple):
    """The sections of a part, by deadline then end then as plan() makes them: the positions
    in ``paired`` of each one's acquire and of the call that ends it (-1: none), its deadline
    ``d`` and end ``e`` (``BIG``: none), and ``before``, the latest end among the sections
    before each one (``SMALL`` for the first)."""

    acquire: np.ndarray
    release: np.ndarray
    d: np.ndarray
    e: np.ndarray
    before: np.ndarray


def check_rows(key: Hashable, paired: Paired, rows: Any, model: Model, budget: Budget
               ) -> PartResult | None:
    """:func:`checker.lockorder.check_part` of the part at ``rows`` of ``paired``, by array
    operations, where its shape is the plainest (see the module docstring). The part is valid
    when, by deadline then end (:func:`~checker.lockorder.by_deadline`), each section comes
    after only sections that end by its deadline (:func:`~checker.lockorder.first_misfit`
    finds none), and :func:`~checker.lockorder.linearize`'s times are certified to lie in the
    windows (:func:`~checker.lockorder.certified`; the model's replay of acquire p, release p,
    in turn, succeeds by that shape). Else see :func:`_invalid`. None otherwise."""
    if not applies(model):
        return None
    s = sections(paired, rows)
    if s is None:
        return None
    if bool(np.any(s.d < s.before)):
        return _invalid(key, paired, rows, model, budget, s)
    # linearize: acquire, then its release, each at the earliest the order allows.
    ends_here = s.release >= 0
    if bool(np.any(~ends_here[:-1])):
        return None
    m = len(s.acquire)
    times = np.empty(m + int(ends_here.sum()), dtype=np.int64)
    slot = np.arange(m) + np.concatenate(([0], np.cumsum(ends_here)[:-1]))
    start = paired.start
    times[slot] = start[s.acquire]
    times[slot[ends_here] + 1] = start[s.release[ends_here]]
    ats = np.maximum.accumulate(times)
    ops = np.empty(len(times), dtype=np.int64)
    ops[slot] = s.acquire
    ops[slot[ends_here] + 1] = s.release[ends_here]
    # certified: each known op once, inside its window; every known op placed.
    k = paired.known[ops]
    if bool(np.any(k & (ats > paired.end[ops]))) or int(k.sum()) != int(
            paired.known[rows].sum()):
        return None
    return PartResult(VALID, key, CallRows(paired, rows), 0, method="sections")


def sections(paired: Paired, rows: Any) -> Sections | None:
    """The sections :func:`checker.lockorder.plan` makes of the part at ``rows``, in
    :func:`~checker.lockorder.by_deadline`'s order; None unless its shape is the plainest."""
    names = paired.cols.fs
    code = {name: i for i, name in enumerate(names)}
    acq, rel = code.get("acquire", -1), code.get("release", -1)
    whole = len(rows) == len(paired.f)  # (rows are in order: all of them, as they are)

    def part(x: Any) -> Any:
        return x if whole else x[rows]

    f = part(paired.f)
    if not bool(np.all((f == acq) | (f == rel))) or bool(np.any(part(paired.refused))):
        return None
    if len(f) and int(part(paired.end).max()) >= BIG:  # (end: never before start)
        return None
    # Each process's calls in their order (the part's order is theirs, process by process).
    by = stable_order(part(paired.process)).astype(np.int32)  # (n < 2**31)
    proc = part(paired.process)[by]
    f, start = f[by], part(paired.start)[by]
    known = part(paired.known)[by]
    end = part(paired.end)[by]
    n = len(by)
    head = np.ones(n, dtype=bool)  # a process's first call
    head[1:] = proc[1:] != proc[:-1]
    tail = np.ones(n, dtype=bool)  # its last
    tail[:-1] = head[1:]
    group = np.cumsum(head, dtype=np.int32) - 1  # each call's process, numbered in order
    lasts = np.flatnonzero(tail).astype(np.int32)  # each process's last call
    # An unknown release only last; known outcomes from an acquire, a release only after an
    # acquire (an acquire after an acquire: the lock granted again while held).
    if bool(np.any(~known & (f == rel) & ~tail)):
        return None
    del tail
    kn = np.flatnonzero(known).astype(np.int32)
    kf, kp = f[kn], proc[kn]
    kfirst = np.ones(len(kn), dtype=bool)
    kfirst[1:] = kp[1:] != kp[:-1]
    if bool(np.any(kfirst & (kf != acq))) or bool(np.any(
            ~kfirst[1:] & (kf[1:] == rel) & (kf[:-1] == rel))):
        return None
    klast = np.ones(len(kn), dtype=bool)
    klast[:-1] = kfirst[1:]
    # The unknown release last invoked after the last known op completed (plan() would keep
    # it early, where it may leave a choice), and no op invoked the instant the one before it
    # completed, but an acquire after a release (no choice: _tie_is_moot).
    u = lasts[group[kn[klast]]]
    if bool(np.any(~known[u] & (f[u] == rel) & (start[u] <= end[kn[klast]]))):
        return None
    tie = ~kfirst[1:] & (start[kn[1:]] <= end[kn[:-1]])
    if bool(np.any(tie & (kf[1:] != acq))):
        return None
    # The sections: one per known acquire, ended by the process's next known op if it is a
    # release (an acquire: the section never ends), else by its unknown release last, else by
    # nothing.
    is_a = kf == acq
    a = kn[is_a]
    m = len(a)
    ends_by = np.full(m, -1, dtype=np.int64)
    more = ~klast[is_a]
    nxt = kn[np.flatnonzero(is_a)[more] + 1]
    ends_by[more] = np.where(f[nxt] == rel, nxt, -1)
    del nxt
    u = lasts[group[a[~more]]]
    ends_by[~more] = np.where(~known[u] & (f[u] == rel), u, -1)
    has_end = ends_by >= 0
    d = end[a]
    e = np.full(m, BIG, dtype=np.int64)
    e[has_end] = np.maximum(start[a][has_end], start[ends_by[has_end]])
    # By deadline, then end, then as plan() makes them (processes by their first call in
    # the part, then each one's in turn).
    first_pos = by[head][group[a]]
    del head, group, lasts, kf, kp, kfirst, klast, tie
    order = np.lexsort((a, first_pos, e, d))
    del first_pos
    d, e = d[order], e[order]
    before = np.maximum.accumulate(np.concatenate(([SMALL], e[:-1])))
    # Positions in the part's order, then in paired's.
    here = by.astype(np.int64) if whole else np.asarray(rows)[by]
    a_ord, r_ord = a[order], ends_by[order]
    release = np.where(r_ord >= 0, here[np.maximum(r_ord, 0)], -1)
    return Sections(here[a_ord], release, d, e, before)


# ---------------------------------------------------------------------------------------------
# No order: checker.lockorder._invalid over the arrays


def _invalid(key: Hashable, paired: Paired, rows: Any, model: Model, budget: Budget,
             s: Sections) -> PartResult | None:
    """:func:`checker.lockorder.check_part`'s invalid verdict where no section of those up
    to the last misfit can go last (:func:`~checker.lockorder.any_can_go_last`; else its
    peeling decides, with objects: None): its witness, the search's on the sections from just
    before the first misfit on (those are what ``_invalid`` calls the core), after the prefix
    of the sections before them, replayed as acquire p, release p in turn (every op changes
    the state; the shape guarantees the model accepts them). Only the core's calls, and the
    few calls the witness shows, are made objects."""
    misfit = s.d < s.before
    m = int(np.flatnonzero(misfit)[-1]) + 1  # len(order) - fits_last(order)
    d, e = s.d[:m], s.e[:m]
    if _can_go_last(d, e):
        return None
    k = int(np.argmax(misfit))  # first_misfit, of order and of order[:m] alike
    j = k if k < m and s.before[k] <= d[k] else max(0, k - 1)
    if bool(np.any(s.release[:j] < 0)):  # (a section that never ends is never in the prefix)
        return None
    prefix = np.empty(2 * j, dtype=np.int64)  # acquire, release, ... in the order
    prefix[0::2] = s.acquire[:j]
    prefix[1::2] = s.release[:j]
    rest = model.init[1:]
    state = (None, *rest)  # after a release (or none: the model's initial state, the same)
    if state != model.init:
        return None
    core = np.concatenate((s.acquire[j:m], s.release[j:m][s.release[j:m] >= 0]))
    core = core[np.argsort(paired.irow[core], kind="stable")]  # by seq
    give_back()  # (the arrays let go so far, before the window's objects are made)
    window = paired.calls(core)
    sub = Budget(_remaining(budget, WINDOW_TIME_S), WINDOW_STATES)
    found = Part(key, window, model, init=state).search(sub, witness=False)
    if found.valid is VALID:
        return _unexpected("the search finds the sections with no order linearizable")
    # Each window call's seq is its invocation's row (Paired.calls), and the core is in the
    # order of those rows: a call's place in the window is found by its seq.
    rows_in = paired.irow[core]
    if found.valid is INVALID:
        tail = found.chain
        end_state = found.state if found.state is not None else state
    else:  # the search ran out: the op of the core that had to take effect first
        tail = []
        end_state = state
    # The known call of the core not in the chain that completed first (then by seq).
    free = paired.known[core]
    free[np.searchsorted(rows_in, [c.seq for c, _ in tail])] = False
    firsts = np.flatnonzero(free)
    blocked = window[int(firsts[np.lexsort((rows_in[firsts], paired.end[core][firsts]))[0]])]
    shown = [blocked, *(c for c, _ in tail)]
    where = {c.seq: int(core[np.searchsorted(rows_in, c.seq)]) for c in shown}
    states = found.states
    del window, core, found  # (what the witness shows is in ``tail`` and ``blocked``)
    witness = _witness(model, key, paired, rows, prefix, tail, where, end_state, blocked)
    budget.states += states
    return PartResult(INVALID, key, CallRows(paired, rows), states, witness,
                      method="sections")


def _can_go_last(d: np.ndarray, e: np.ndarray) -> bool:
    """:func:`checker.lockorder.any_can_go_last` of sections with no token, each with an
    acquire: the candidates are the first with the latest end and the first with the latest
    deadline."""
    n = len(d)
    if not n:
        return False
    last = int(np.argmax(e))
    others = max(e[:last].max(initial=SMALL), e[last + 1:].max(initial=SMALL))
    if d[last] >= others:
        return True
    due = int(np.argmax(d))
    return due != last and bool(d[due] >= e[last])


def _witness(model: Model, key: Hashable, paired: Paired, rows: Any, prefix: np.ndarray,
             tail: list[tuple[Call, State]], where: dict[int, int], state: State,
             blocked: Call) -> dict[str, Any]:
    """:func:`checker.witness.make_witness` of the part at ``rows`` of ``paired``, its chain
    the calls at positions ``prefix`` (acquire, release, ... from the model's initial state)
    then ``tail`` (objects: ``where`` gives their positions by seq), over the arrays. The
    biggest arrays are let go before the prefix's indexes are made a list (an int object each)."""
    rows = np.asarray(rows)
    whole = len(rows) == len(paired.irow)  # (rows are in order: all of them, as they are)

    def part(x: np.ndarray) -> np.ndarray:
        return x if whole else x[rows]

    chain_pos = np.concatenate((prefix, np.array([where[c.seq] for c, _ in tail],
                                                 dtype=np.int64)))
    chain_index = paired.index(chain_pos)
    assert blocked.end is not None
    setter = last_change(model.init, tail)  # (the prefix ends in the initial state)
    if setter is None and len(prefix):
        setter = paired.calls(prefix[-1:])[0]  # every op of the prefix changes the state
    since = min(blocked.start, setter.start if setter is not None else blocked.start)
    start = part(paired.start)
    pending = start <= blocked.end
    done = np.zeros(len(paired.irow), dtype=bool)
    done[chain_pos] = True
    done[where[blocked.seq]] = True  # (not pending either)
    del chain_pos
    pending &= ~part(done)
    del done
    near = pending & (part(paired.known) | (start >= since))
    older = int(pending.sum()) - int(near.sum())
    del pending
    concurrent = rows[near]
    del near
    concurrent = concurrent[np.lexsort((paired.irow[concurrent], paired.start[concurrent]))]
    concurrent_index = paired.index(concurrent)
    span = _conflict(part(paired.process), start, blocked, setter)
    chain = _Chain(paired, prefix, tail, model.init[1:])
    by_start = rows[np.argsort(start, kind="stable")]
    words = explain(model, key, CallRows(paired, rows), state, blocked, chain,
                    by_start=CallRows(paired, by_start))
    del by_start, start
    return assemble(
        model, key, len(rows), state, blocked, setter,
        concurrent=concurrent_index.tolist(), older=older,
        head=paired.calls(concurrent[:CONCURRENT_ROWS]), prefix=chain_index.tolist(),
        span=span, tail=[chain.item(i) for i in range(max(0, len(chain) - LINEARIZATION_ROWS),
                                                      len(chain))],
        chain=len(chain), explanation=words)


def _conflict(process: np.ndarray, invoked: np.ndarray, blocked: Call, setter: Call | None
              ) -> tuple[int, int, list[Any]]:
    """:func:`checker.witness.conflict` over the part's arrays (each call's process and
    invocation time)."""
    assert blocked.end is not None
    start = blocked.end
    if setter is not None and setter.end is not None and setter.end > start:
        start = setter.end
    procs = [blocked.process] if setter is None else [setter.process, blocked.process]
    mine = process == procs[0]
    if len(procs) > 1:
        mine |= process == procs[1]
    after = invoked[mine & (invoked > start)]
    return start, int(after.min()) if len(after) else start, list(dict.fromkeys(procs))


class _Chain(Sequence[Call]):
    """The linearizable prefix's calls: those at positions ``prefix`` of ``paired`` (made
    objects when read), then those of ``tail``."""

    def __init__(self, paired: Paired, prefix: np.ndarray, tail: list[tuple[Call, State]],
                 rest: tuple[Any, ...]) -> None:
        self.paired = paired
        self.prefix = prefix
        self.tail = tail
        self.rest = rest  # the state's fields after the holder (fenced-mutex: a token)

    def __len__(self) -> int:
        return len(self.prefix) + len(self.tail)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.item(i)[0]

    def item(self, i: int) -> tuple[Call, State]:
        """The ``i``-th call and the state after it: a prefix's acquire p leaves the lock
        held by p, its release free."""
        if i < 0:
            i += len(self)
        n = len(self.prefix)
        if i >= n:
            return self.tail[i - n]
        if i < 0:
            raise IndexError(i)
        c = self.paired.calls(self.prefix[i:i + 1])[0]
        return c, (c.process if i % 2 == 0 else None, *self.rest)
