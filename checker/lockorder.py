"""Linearizability of a lock's history in O(n log n): the order of its critical sections.

For the ``mutex`` and ``fenced-mutex`` models (:mod:`checker.models`) a lock history needs no
search in the common case. The only state is who holds the lock, and each process is
sequential, so one process's ops, in its own order, say when it must hold the lock: from an
acquire that completed ok to the release (or refused release) that ends it. Each such stretch
is a **section**. Ops whose outcome is unknown may take effect at any time after their
invocation, or never, so they are kept aside until needed: a release or extend that completed
ok while its process held nothing needs one of its process's indeterminate acquires to have
taken effect (the earliest not used yet: they are interchangeable), and an acquire that
completed ok while its process still held the lock needs one of its indeterminate releases to
have ended the section (the earliest, which ends it soonest). Sections of different processes
cannot overlap; the question is whether they can be put in one order.

For a section i let d_i be the earliest completion among its ops with a known outcome (they
must all take effect by then) and e_i the invocation of the op that ends it (infinite if
nothing does). Placing every op as early as its window and the order allow, the lock is free
again after the sections before i at max e_j over them, so an order works iff every section
comes after only sections with e_j <= d_i (and, for fenced-mutex, the tokens of the grants rise
along it). Any subset of a feasible set is feasible, so the order is built from the end: take as
last any section whose d is at least every other e (and whose token, if any, is the highest);
when none can be last there is no order. A few heap operations per section.

This is the lock's counterpart of Lee and Mathur's observation for registers (OOPSLA 2025: when
every value written is unique, each read names its write, and linearizability is decided in
O(n log n) without search): here each release and extend names its grant by its process's own
order, and each grant is unique.

The premise, checked as the sections are built: no op of a process is invoked at the very
time (ns) the one before it completed (then either may take effect first, and the process's own
order no longer decides); an unused indeterminate release is never available where it would
leave a real choice: at an op that needs the lock held while an indeterminate acquire could
grant it again (released early and re-acquired, or held all along?), or at a refused release
that ends the section anyway (end it there, or earlier?); granted tokens are numbers, not NaN; no
acquire failed in a way the model counts as an event. Where it does not hold, the part goes to
the search (checker.wgl).

A valid verdict is certified: the order becomes a linearization, each op at a time in its window,
replayed through the model; should that ever fail, the part goes to the search. An invalid
verdict comes with the search's witness on the sections that admit no order (what is left after
peeling the sections that can go first and those that can go last), after the linearizable
prefix of the sections that go first.
"""

from __future__ import annotations

import heapq
import math
import operator
import time
from collections import deque
from collections.abc import Hashable, Iterable

from checker.calls import Call
from checker.models import Model, State, fenced_step, mutex_step
from checker.wgl import INVALID, VALID, Budget, Part, PartResult
from checker.witness import make_witness

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

INF = math.inf
WINDOW_TIME_S = 10.0  # the search for the witness, on the sections that admit no order
WINDOW_STATES = 500_000


def applies(model: Model) -> bool:
    """The models whose semantics this module implements: mutex and fenced-mutex."""
    return model.step is mutex_step or model.step is fenced_step


class Section:
    """One stretch in which a process holds the lock, and the ops that need it to."""

    __slots__ = ("acquire", "d", "e", "last", "ops", "process", "release", "start", "token")

    def __init__(self, process: Any, acquire: Call | None, start: float, d: float) -> None:
        self.process = process
        self.acquire = acquire  # None: nothing could have granted it (the section is impossible)
        self.start = start  # its acquire takes effect no earlier
        self.d = d  # every op in it with a known outcome has completed by then
        self.e: float = INF  # the op that ends it was invoked then (INF: nothing ends it)
        self.last = start  # the latest invocation among its ops
        self.ops: list[Call] | None = None  # extends, in order
        self.release: Call | None = None
        self.token: Any = None  # fenced-mutex: the grant's token (None: none to compare)

    def calls(self) -> list[Call]:
        out = [] if self.acquire is None else [self.acquire]
        if self.ops:
            out.extend(self.ops)
        if self.release is not None:
            out.append(self.release)
        return out


class Plan:
    """The sections of one part, the refused ops that change nothing (their process held no
    lock), and for each such op its process's op before it."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.loose: list[tuple[Call, Call | None]] = []


def plan(calls: list[Call], fenced: bool) -> Plan | None:
    """The sections of a part, process by process, or None when the premise does not hold."""
    by_process: dict[Any, list[Call]] = {}
    for c in calls:
        by_process.setdefault(c.process, []).append(c)
    out = Plan()
    for p, ops in by_process.items():
        if not _walk(p, ops, fenced, out):
            return None
    return out


def _walk(p: Any, ops: list[Call], fenced: bool, out: Plan) -> bool:
    grants: deque[Call] = deque()  # p's indeterminate acquires not used yet (earliest first)
    ends: deque[Call] = deque()  # p's indeterminate releases not used yet
    cur: Section | None = None  # the section open now (the lock is p's)
    prev: Call | None = None  # p's op with a known outcome before this one
    held_before_prev = False  # whether p held the lock before prev
    pooled: set[int] = set()

    def keep(c: Call) -> None:
        """An indeterminate op, kept for when it is needed (an extend never is)."""
        if c.seq not in pooled:
            pooled.add(c.seq)
            if c.f == "acquire":
                grants.append(c)
            elif c.f == "release":
                ends.append(c)

    new_section = out.sections.append
    n = len(ops)  # in invocation order, as prepared
    for i in range(n):
        c = ops[i]
        if not c.known:
            keep(c)
            continue
        if prev is not None and c.start <= prev.end and not _tie_is_moot(  # type: ignore[operator]
                prev, c, held_before_prev, bool(ends)):
            return False  # invoked the instant the op before completed: either may go first
        # Indeterminate ops invoked the instant c completes may take effect just before it.
        j = i + 1
        while j < n and ops[j].start <= c.end:  # type: ignore[operator]
            if not ops[j].known:
                keep(ops[j])
            j += 1
        held_before_prev = cur is not None
        if c.f == "acquire":
            if c.refused:
                return False  # a failed acquire the model counts as an event: not ours
            if cur is not None and ends:
                _close(cur, ends.popleft())  # it must have taken effect: the lock was free
            # else: held and granted again; the old section never ends (e stays INF)
            cur = Section(p, c, c.start, c.end)  # type: ignore[arg-type]
            if fenced:
                cur.token = _token(c)
                if isinstance(cur.token, float) and math.isnan(cur.token):
                    return False
            new_section(cur)
        elif c.refused:  # "not the holder": frees the lock if p held it, else changes nothing
            if cur is not None:
                if ends:
                    return False  # end the section at c, or earlier and keep c's place: a choice
                if c.end < cur.d:  # type: ignore[operator]
                    cur.d = c.end  # type: ignore[assignment]
                _close(cur, c)
                cur = None
            else:
                out.loose.append((c, prev))
        else:  # a release or extend that completed ok: the lock was p's
            if cur is None:
                if grants:
                    granted = grants.popleft()
                    start = granted.start if prev is None else max(granted.start, prev.start)
                    cur = Section(p, granted, start, c.end)  # type: ignore[arg-type]
                else:
                    cur = Section(p, None, c.start, c.end)  # type: ignore[arg-type]
                new_section(cur)
            elif ends and grants:
                return False  # released early and granted again, or held all along: a choice
            if c.end < cur.d:  # type: ignore[operator]
                cur.d = c.end  # type: ignore[assignment]
            if c.f == "release":
                _close(cur, c)
                cur = None
            else:
                if cur.ops is None:
                    cur.ops = []
                cur.ops.append(c)
                if c.start > cur.last:
                    cur.last = c.start
        prev = c
    if cur is not None and ends:
        _close(cur, ends.popleft())
    return True


def _close(s: Section, end: Call) -> None:
    s.release = end
    s.e = s.last if s.last > end.start else end.start


def _tie_is_moot(a: Call, b: Call, held: bool, ends: bool) -> bool:
    """``b`` was invoked the instant ``a`` (the process's op before it) completed, so either may
    take effect first. True when taking ``b`` first could not help: a release of the section
    the process held, then an acquire (the acquire first would find the lock still held, with
    no indeterminate release to free it); or two acquires (whichever goes second finds it held).
    Every other such tie leaves a choice, for the search."""
    if a.refused or b.refused or b.f != "acquire" or ends:  # (refused: completed as a fail)
        return False
    return a.f == "acquire" or (a.f == "release" and held)


def _token(c: Call) -> Any:
    """The grant's fencing token as fenced_step compares it (None: it constrains nothing)."""
    token = c.completion.get("token") if c.completion.get("type") == "ok" else None
    if token is None or isinstance(token, bool) or not isinstance(token, int | float):
        return None
    return token


# ---------------------------------------------------------------------------------------------
# The order


def peel(sections: list[Section]) -> tuple[list[Section], list[Section]]:
    """Sections taken off the end while one can go last: (those taken, last first; those left,
    which admit no order when any are). A section can go last when its d is at least every
    other section's e and its token (if any) is the highest; an impossible section (no
    acquire) never can. Any that can will do: a subset of a feasible set is feasible."""
    n = len(sections)
    dd = [s.d for s in sections]
    ee = [s.e for s in sections]
    tok = [s.token for s in sections]
    gone = [False] * n
    by_e = [(-ee[i], i) for i in range(n)]
    by_d = [(-dd[i], i) for i in range(n) if tok[i] is None and sections[i].acquire is not None]
    by_t = [(-tok[i], i) for i in range(n) if tok[i] is not None]
    for heap in (by_e, by_d, by_t):
        heapq.heapify(heap)
    taken: list[Section] = []
    left = n
    while left:
        j1, m1, m2 = _top_two(by_e, gone)
        t1, _, t2 = _top_two(by_t, gone)
        k = _top(by_d, gone)
        picked = -1
        # The candidates: the latest deadline among sections without a token, the latest
        # end (it is not among the "others" it must end before), the highest token.
        for c in dict.fromkeys(x for x in (k, j1, t1) if x is not None):
            if sections[c].acquire is None:
                continue
            if dd[c] < (m2 if c == j1 else m1):
                continue
            if tok[c] is not None and (c != t1 or tok[c] <= t2):
                continue
            picked = c
            break
        if picked < 0:
            break
        gone[picked] = True
        taken.append(sections[picked])
        left -= 1
    return taken, [s for s, g in zip(sections, gone, strict=True) if not g]


def _top(heap: list[tuple[float, int]], gone: list[bool]) -> int | None:
    while heap and gone[heap[0][1]]:
        heapq.heappop(heap)
    return heap[0][1] if heap else None


def _top_two(heap: list[tuple[float, int]], gone: list[bool]
             ) -> tuple[int | None, float, float]:
    """The item with the largest key, that key, and the second largest key (-INF if none)."""
    first = _top(heap, gone)
    if first is None:
        return None, -INF, -INF
    entry = heapq.heappop(heap)
    second = -heap[0][0] if _top(heap, gone) is not None else -INF
    heapq.heappush(heap, entry)
    return first, -entry[0], second


# ---------------------------------------------------------------------------------------------
# From an order to a linearization


def linearize(order: list[Section], loose: list[tuple[Call, Call | None]],
              upto: float = INF) -> tuple[list[float], list[Call], float]:
    """The ops of ``order``, each at the earliest time its window and the order allow, and the
    refused ops that change nothing (each from its invocation, right after its process's op
    before it, when that one is placed) up to time ``upto``: the times and the ops, in
    linearization order, and the time the lock is free after the last section."""
    ats: list[float] = []
    ops: list[Call] = []
    t = -INF
    for s in order:
        assert s.acquire is not None
        at = t if t > s.start else s.start
        acquire = s.acquire
        if acquire.start > at:
            at = acquire.start
        ats.append(at)
        ops.append(acquire)
        if s.ops:
            for c in s.ops:
                if c.start > at:
                    at = c.start
                ats.append(at)
                ops.append(c)
        release = s.release
        if release is None:
            t = INF
        else:
            if release.start > at:
                at = release.start
            ats.append(at)
            ops.append(release)
            t = at
    if loose:
        ats, ops = _with_loose(ats, ops, loose, upto)
    return ats, ops, t


def _with_loose(ats: list[float], ops: list[Call], loose: list[tuple[Call, Call | None]],
                upto: float) -> tuple[list[float], list[Call]]:
    """Each refused op that changed nothing, merged in right after its process's op before it
    (or from its invocation, if that one came later)."""
    where = {id(c): (at, n) for n, (at, c) in enumerate(zip(ats, ops, strict=True))}
    keyed: list[tuple[float, float, int, int, Call]] = [
        (at, n, 0, c.seq, c) for n, (at, c) in enumerate(zip(ats, ops, strict=True))]
    for c, before in loose:  # in each process's own order
        if before is None:
            at, ahead = c.start, -1.0
        elif id(before) in where:
            at, ahead = max(c.start, where[id(before)][0]), where[id(before)][1]
        else:
            continue  # its process's op before it is not placed (not in this order)
        if at <= upto:
            keyed.append((at, ahead, 1, c.seq, c))
            where[id(c)] = (at, ahead)
    keyed.sort(key=lambda x: x[:4])
    return [x[0] for x in keyed], [x[4] for x in keyed]


def replay(model: Model, ops: Iterable[Call], start: State | None = None
           ) -> list[tuple[Call, State]] | None:
    """Each op with the state after it, or None if the model refuses one."""
    state = model.init if start is None else start
    step = model.step
    out = []
    for c in ops:
        nxt = step(state, c.f, c.value, c.completion)
        if nxt is None:
            return None
        state = nxt
        out.append((c, state))
    return out


def certified(model: Model, calls: list[Call], ats: list[float], ops: list[Call]) -> bool:
    """``ops`` at times ``ats`` is a linearization of the part: every op with a known outcome
    once, each at a time inside its window, in time order (which then respects real time),
    and the model accepts them all in that order."""
    seen = bytearray(max((c.seq for c in calls), default=0) + 1)
    known = 0
    last = -INF
    state = model.init
    step = model.step
    for at, c in zip(ats, ops, strict=True):
        if seen[c.seq] or at < last or at < c.start or (c.end is not None and at > c.end):
            return False
        seen[c.seq] = 1
        known += c.known
        last = at
        state = step(state, c.f, c.value, c.completion)
        if state is None:
            return False
    return known == sum(1 for c in calls if c.known)


# ---------------------------------------------------------------------------------------------
# The check of one part


def check_part(key: Hashable, calls: list[Call], model: Model, budget: Budget
               ) -> PartResult | None:
    """The verdict on one part, or None when it needs the search (see the module docstring)."""
    fenced = model.step is fenced_step
    p = plan(calls, fenced)
    if p is None:
        return None
    order = by_deadline(p.sections)
    k = first_misfit(order)
    if k < len(order):
        # Off the end, in deadline order, what can go last; then exactly, by heaps, in what
        # is left, unless nothing there can go last at all (a violation: what precedes it
        # stays, and is the witness's prefix).
        m = len(order) - fits_last(order)
        rest = order[:m]
        if not any_can_go_last(rest):
            return _invalid(key, calls, model, budget, p, rest)
        taken, stuck = peel(rest)
        if stuck:
            return _invalid(key, calls, model, budget, p, by_deadline(stuck))
        order = taken[::-1] + order[m:]
    ats, ops, _ = linearize(order, p.loose)
    if not certified(model, calls, ats, ops):
        return _unexpected("the order found does not replay")
    return PartResult(VALID, key, calls, 0, method="sections")


_by_d = operator.attrgetter("d")
_by_e = operator.attrgetter("e")


def by_deadline(sections: list[Section]) -> list[Section]:
    order = sorted(sections, key=_by_e)
    order.sort(key=_by_d)  # stable: by d, then e
    return order


def first_misfit(order: list[Section]) -> int:
    """The first section of ``order`` that cannot come next: impossible, a deadline before the
    end of a section before it, or a token not above theirs (len(order) if none: it is an
    order, what a valid history gives almost always, at the cost of a sort)."""
    t = -INF
    top = None
    for i, s in enumerate(order):
        if s.acquire is None or s.d < t:
            return i
        if s.token is not None:
            if top is not None and s.token <= top:
                return i
            top = s.token
        if s.e > t:
            t = s.e
    return len(order)


def fits_last(order: list[Section]) -> int:
    """How many sections at the end of ``order`` can go last one after the other (each with a
    deadline after every end before it, and the highest token)."""
    n = len(order)
    max_e: list[float] = [-INF] * (n + 1)  # max_e[i]: the latest end among order[:i]
    max_t: list[Any] = [None] * (n + 1)
    for i, s in enumerate(order):
        max_e[i + 1] = s.e if s.e > max_e[i] else max_e[i]
        top = max_t[i]
        max_t[i + 1] = s.token if (s.token is not None and (top is None or s.token > top)) \
            else top
    m = n
    while m:
        s = order[m - 1]
        if s.acquire is None or s.d < max_e[m - 1]:
            break
        if s.token is not None and max_t[m - 1] is not None and s.token <= max_t[m - 1]:
            break
        m -= 1
    return n - m


def any_can_go_last(sections: list[Section]) -> bool:
    """Whether any of ``sections`` could go last: :func:`peel`'s first step, by linear scans
    (the only candidates are the latest deadline without a token, the latest end and the
    highest token)."""
    n = len(sections)
    if not n:
        return False
    ends = heapq.nlargest(2, range(n), key=lambda i: sections[i].e)
    tokens = heapq.nlargest(2, (i for i in range(n) if sections[i].token is not None),
                            key=lambda i: sections[i].token)
    plain = [i for i in range(n) if sections[i].token is None and sections[i].acquire]
    candidates = {ends[0], *tokens[:1]}
    if plain:
        candidates.add(max(plain, key=lambda i: sections[i].d))
    for c in candidates:
        s = sections[c]
        if s.acquire is None:
            continue
        if c == ends[0]:
            others_e = sections[ends[1]].e if len(ends) > 1 else -INF
        else:
            others_e = sections[ends[0]].e
        if s.d < others_e:
            continue
        if s.token is not None and (c != tokens[0] or (
                len(tokens) > 1 and sections[tokens[1]].token >= s.token)):
            continue
        return True
    return False


def _invalid(key: Hashable, calls: list[Call], model: Model, budget: Budget, p: Plan,
             order: list[Section]) -> PartResult | None:
    """No order (``order``: sections that admit none, by deadline): the witness is the
    search's on those left after the linearizable prefix of those that can go first (each
    ending before any other is due, so that what is left admits no order either)."""
    k = first_misfit(order)
    ends = [s.e for s in order[:k]]
    j = k if k < len(order) and max(ends, default=-INF) <= order[k].d else max(0, k - 1)
    first, core = order[:j], order[j:]
    _, ops, free_at = linearize(first, p.loose, upto=_first_deadline(core))
    prefix = replay(model, ops)
    if prefix is None:
        return _unexpected("the prefix of the sections that go first does not replay")
    state = prefix[-1][1] if prefix else model.init
    window = [c for s in core for c in s.calls()]
    last = max((c.end for c in window if c.end is not None), default=free_at)
    if p.loose:
        placed = {id(c) for c in ops if c.refused}
        window += [c for c, _ in p.loose if id(c) not in placed and c.start <= last]
    window.sort(key=lambda c: c.seq)
    sub = Budget(_remaining(budget, WINDOW_TIME_S), WINDOW_STATES)
    found = Part(key, window, model, init=state).search(sub, witness=False)
    budget.states += found.states
    if found.valid is VALID:
        return _unexpected("the search finds the sections with no order linearizable")
    if found.valid is INVALID:
        chain = prefix + found.chain
        done = {id(c) for c, _ in found.chain}
        blocked = min((c for c in window if c.known and id(c) not in done),
                      key=lambda c: (c.end, c.seq))
        end_state = found.state if found.state is not None else state
    else:  # the search ran out: the op of the core that had to take effect first
        chain = prefix
        blocked = min((c for c in window if c.known), key=lambda c: (c.end, c.seq))
        end_state = state
    witness = make_witness(model, key, calls, chain, end_state, blocked)
    return PartResult(INVALID, key, calls, found.states, witness, method="sections")


STRICT = False  # tests set it: an unexpected disagreement raises instead of falling back


def _unexpected(what: str) -> None:
    """Never expected (the reasoning of this module says it cannot happen): the search then
    decides on the whole part; the tests make it an error."""
    if STRICT:
        raise AssertionError(f"checker.lockorder: {what}")
    return None


def _first_deadline(core: list[Section]) -> float:
    return min((s.d for s in core), default=INF)


def _remaining(budget: Budget, cap: float) -> float:
    if budget.deadline is None:
        return cap
    return max(0.1, min(cap, budget.deadline - time.monotonic()))
