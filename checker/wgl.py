"""The Wing & Gong search with Lowe's cache, over one part (lock) of a history.

How (as in Knossos and Porcupine):

- Each op with a known outcome becomes a call entry and a return entry in a doubly linked list
  ordered by time (calls before returns at equal times: equal times are concurrent). The search
  walks the list from its head: a call entry met before any return entry may be linearized now
  (its op is removed from the list, "lifted"); meeting a return entry means that op should
  already have been linearized, so the search backtracks (undoes its latest choice).
- A cache of the configurations already explored, (set of linearized ops, model state), prunes
  every path that reaches one again: that is what makes the search practical.

Indeterminate ops (``info``, or invoked and never completed) may have taken effect at any
time after their invocation, or never. They have no return entry: nothing ever forces them,
the search may linearize one whenever it is stuck on a return entry, and the history is
linearizable as soon as every op with a known outcome is linearized, whatever the
indeterminate ones did. (Never "forcing" them is what keeps an acquire that timed out, and
never happened, from holding the lock forever in the model.) What keeps them cheap:

- they are tried only after the ops with a known outcome (a valid history is usually found
  without ever touching them);
- one that would not change the state (a read whose outcome is unknown) is never tried;
- two pending indeterminate ops that look the same to the model (same f and value, and same
  process unless the model never reads it) are interchangeable, so only the earliest of them is
  ever tried;
- a configuration is pruned when one with the same known ops and state, and a subset of its
  indeterminate ops, was explored (:class:`_Seen`);
- a model may declare a state hopeless (``Model.stuck``: a lock held by a process that never
  releases again, while other processes still need it); the search does not enter it.

The set of linearized ops is kept compactly: ops with a known outcome are numbered in call
order, and the set is (the lowest op not yet linearized, bitmask of the linearized ops above
it): a window as wide as the ops concurrent with that op, not as the whole history. Indeterminate
ops have a bitmask of their own. States are interned (a small number each) and every op's
transitions memoised, so the model is asked once per (op, state). The cache is exact (no
hashing of states into fingerprints, so no false "already seen").

Pure: no I/O; the only clock is ``time.monotonic``, read for the time budget.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable, Sequence

from checker.calls import Call
from checker.models import Model, State, freeze
from checker.witness import make_witness
from harness.core.history import FAIL

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any

VALID = True
INVALID = False
UNKNOWN = "unknown"

_CHECK_CLOCK_EVERY = 1024


class Budget:
    """A time limit (seconds) and a cap on cache entries, shared by every part of one check."""

    def __init__(self, time_limit: float | None, max_states: int | None) -> None:
        self.deadline = None if time_limit is None else time.monotonic() + time_limit
        self.max_states = max_states
        self.states = 0
        self.reason: str | None = None
        self.time_limit = time_limit

    def out_of_time(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.reason = f"time limit of {self.time_limit} s reached"
            return True
        return False

    def out_of_states(self, in_part: int) -> bool:
        if self.max_states is not None and self.states + in_part > self.max_states:
            self.reason = f"search cache reached max_states={self.max_states}"
            return True
        return False


class _Remaining:
    """Counts of ops not yet linearized, for ``Model.stuck`` (see ``checker.models.Remaining``)."""

    def __init__(self, calls: Sequence[Call], required: int) -> None:
        self.required = required
        self.counts: dict[tuple[Any, ...], int] = {}
        for c in calls:
            self.counts[c.ckey] = self.counts.get(c.ckey, 0) + 1
        self._failed_keys = [k for k in self.counts if len(k) == 3]

    def count(self, process: Any, f: str) -> int:
        return self.counts.get((process, f), 0) + self.counts.get((process, f, FAIL), 0)

    def failed(self) -> int:
        """Ops that failed in a way the model understands (a refused release), not yet placed."""
        return sum(self.counts[k] for k in self._failed_keys)


class PartResult:
    """The verdict on one part (lock), its ops, cache entries used, and the witness if false
    (with the prefix it was made of, as (op, state after it), and the state it ends in).
    ``method``: how the verdict was reached (``search``, or ``sections``: checker.lockorder)."""

    def __init__(self, valid: bool | str, key: Hashable, calls: list[Call], states: int,
                 witness: dict[str, Any] | None = None, method: str = "search") -> None:
        self.valid = valid
        self.key = key
        self.calls = calls
        self.states = states
        self.witness = witness
        self.method = method
        self.chain: list[tuple[Call, State]] = []
        self.state: State | None = None


def _intern(state: State | None, states: list[State], sid_of: dict[State, int]) -> int:
    """The number of ``state`` in ``states`` (added if new); -1 for None (the op cannot happen)."""
    if state is None:
        return -1
    sid = sid_of.get(state)
    if sid is None:
        sid = sid_of[state] = len(states)
        states.append(state)
    return sid


class _Seen:
    """The configurations already explored: for each (linearized ops with a known outcome,
    state), the sets of indeterminate ops linearized with it, kept as an antichain.

    A configuration that linearized a superset of the indeterminate ops of one already
    explored, with the same known ops and the same state, is pruned too (not only an equal
    one): the smaller set leaves every op of the larger one still available, and indeterminate
    ops constrain nothing, so whatever the larger one could reach, the smaller one could too.
    (Twins are always taken earliest first, so "superset" is also "at least as many of each".)
    Most keys have one set, stored as the int itself; ``size`` counts the sets, for the budget.
    """

    __slots__ = ("size", "table")

    def __init__(self) -> None:
        self.table: dict[tuple[int, int, int], Any] = {}
        self.size = 0

    def visit(self, key: tuple[int, int, int], bits: int) -> bool:
        """True (and remembered) if no configuration explored so far prunes this one."""
        table = self.table
        had = table.get(key)
        if had is None:
            table[key] = bits
            self.size += 1
            return True
        if type(had) is int:
            if had & ~bits == 0:
                return False
            if bits & ~had == 0:  # the new set is smaller: it replaces the old one
                table[key] = bits
            else:
                table[key] = [had, bits]
                self.size += 1
            return True
        for b in had:
            if b & ~bits == 0:
                return False
        kept = [b for b in had if bits & ~b != 0]
        kept.append(bits)
        self.size += len(kept) - len(had)
        table[key] = kept
        return True


class Part:
    """The WGL search over one part (one lock). Build once, then :meth:`search`. ``init``: the
    state to start from (the model's own by default)."""

    def __init__(self, key: Hashable, calls: list[Call], model: Model,
                 init: State | None = None) -> None:
        self.key = key
        self.model = model
        self.calls = calls
        self.init: State = model.init if init is None else init
        for c in calls:  # what :class:`_Remaining` counts it under
            failed = c.known and c.comp is not None and c.comp.get("type") == FAIL
            c.ckey = (c.process, c.f, FAIL) if failed else (c.process, c.f)
        events: list[tuple[int, int, int, Call]] = []
        for c in calls:
            events.append((c.start, 0, c.seq, c))
            if c.known:
                assert c.end is not None
                events.append((c.end, 1, c.seq, c))
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        self.known: list[Call] = [e[3] for e in events if e[1] == 0 and e[3].known]
        self.unknown: list[Call] = [e[3] for e in events if e[1] == 0 and not e[3].known]
        self._build_main_list(events)
        self._build_info_list(events)

    def _build_main_list(self, events: list[tuple[int, int, int, Call]]) -> None:
        """Entries 1..2m for the known ops, in time order; 0 is the head, 2m+1 the tail."""
        m = len(self.known)
        kid = {id(c): i for i, c in enumerate(self.known)}
        self.tail = 2 * m + 1
        self.ent_op = [-1] * (2 * m + 2)
        self.ent_call = [False] * (2 * m + 2)
        self.ent_pos = [0] * (2 * m + 2)
        self.call_ent = [0] * m
        self.ret_ent = [0] * m
        e = 0
        for pos, (_, kind, _, c) in enumerate(events):
            if not c.known:
                continue
            e += 1
            x = kid[id(c)]
            self.ent_op[e] = x
            self.ent_call[e] = kind == 0
            self.ent_pos[e] = pos
            if kind == 0:
                self.call_ent[x] = e
            else:
                self.ret_ent[x] = e
        self.ent_pos[self.tail] = len(events)
        self.nxt = [*range(1, 2 * m + 2), self.tail]
        self.prv = [0, *range(0, 2 * m + 1)]

    def _build_info_list(self, events: list[tuple[int, int, int, Call]]) -> None:
        """Indeterminate ops 0..k-1 in call order (k: head, k+1: tail), with their symmetry."""
        k = len(self.unknown)
        uid = {id(c): i for i, c in enumerate(self.unknown)}
        self.ihead, self.itail = k, k + 1
        self.info_pos = [0] * (k + 2)
        for pos, (_, _, _, c) in enumerate(events):
            if not c.known:
                self.info_pos[uid[id(c)]] = pos
        self.info_pos[self.itail] = len(events) + 1
        self.info_pos[self.ihead] = -1
        # Only the earliest pending op of each signature is in the list (the others wait for
        # it to be linearized, see ``sig_next``): same-looking pending ops are interchangeable
        # (the process is part of the look unless the model never reads it).
        last: dict[Hashable, int] = {}
        self.sig_next = [-1] * k
        leaders = []
        blind = self.model.process_blind
        for j, c in enumerate(self.unknown):
            sig = (c.f, freeze(c.value)) if blind else (c.f, freeze(c.value), c.process)
            if sig in last:
                self.sig_next[last[sig]] = j
            else:
                leaders.append(j)
            last[sig] = j
        self.inxt = [self.itail] * (k + 2)
        self.iprv = [self.ihead] * (k + 2)
        for a, b in itertools.pairwise([self.ihead, *leaders, self.itail]):
            self.inxt[a] = b
            self.iprv[b] = a

    def search(self, budget: Budget, witness: bool = True) -> PartResult:
        """Run the search; return valid / invalid (with a witness, unless ``witness`` is
        False: then only the prefix and the state it ends in) / unknown (budget spent)."""
        model = self.model
        step, stuck = model.step, model.stuck
        known, unknown = self.known, self.unknown
        nxt, prv, ent_op, ent_call, ent_pos = (self.nxt, self.prv, self.ent_op, self.ent_call,
                                               self.ent_pos)
        call_ent, ret_ent = self.call_ent, self.ret_ent
        inxt, iprv, info_pos, sig_next = self.inxt, self.iprv, self.info_pos, self.sig_next
        rem = _Remaining(self.calls, len(known))
        counts = rem.counts
        # States are interned (a state is its number in ``states``) and each op's transitions
        # are memoised: the model is asked once per (op, state), however often the search
        # comes back to it.
        states: list[State] = [self.init]
        sid_of: dict[State, int] = {self.init: 0}
        ktr: list[dict[int, int]] = [{} for _ in known]
        utr: list[dict[int, int]] = [{} for _ in unknown]
        seen = _Seen()
        visit = seen.visit

        sid = 0
        lo = w = bits = 0  # known ops below lo all linearized; w: those above; bits: info ops
        visit((0, 0, 0), 0)
        stack: list[tuple[Any, ...]] = []
        path: tuple[Any, ...] | None = None  # cons list of (kind, id, state after, parent)
        best: tuple[tuple[Any, ...] | None, State, int] = (None, self.init, 0)
        depth = 0
        entry = nxt[0]
        main = True  # scanning the main list; False: trying info ops before return entry r
        r = icur = 0
        ticks = 0

        while True:
            ticks += 1
            if ticks % _CHECK_CLOCK_EVERY == 0 and budget.out_of_time():
                return self._unknown(budget, seen)
            if rem.required == 0:
                return self._done(budget, seen)
            if main:
                if ent_call[entry]:
                    x = ent_op[entry]
                    tr = ktr[x]
                    nsid = tr.get(sid, -2)
                    if nsid == -2:
                        c = known[x]
                        nsid = _intern(step(states[sid], c.f, c.value, c.completion), states,
                                       sid_of)
                        tr[sid] = nsid
                    if nsid >= 0:
                        ck = known[x].ckey
                        counts[ck] -= 1
                        rem.required -= 1
                        ok = True
                        if stuck is not None and rem.required and stuck(states[nsid], rem):
                            if depth >= best[2]:  # the witness may end in a hopeless state
                                best = ((True, x, states[nsid], path), states[nsid], depth + 1)
                            ok = False
                        else:
                            bit = x - lo
                            w2 = w | (1 << bit)
                            lo2 = lo
                            if bit == 0:
                                t = (~w2 & (w2 + 1)).bit_length() - 1
                                w2 >>= t
                                lo2 = lo + t
                            if not visit((lo2, w2, nsid), bits):
                                ok = False
                            elif budget.out_of_states(seen.size):
                                return self._unknown(budget, seen)
                            else:
                                stack.append((True, x, sid, lo, w))
                                sid, lo, w = nsid, lo2, w2
                                ce, re_ = entry, ret_ent[x]
                                nxt[prv[ce]] = nxt[ce]
                                prv[nxt[ce]] = prv[ce]
                                nxt[prv[re_]] = nxt[re_]
                                prv[nxt[re_]] = prv[re_]
                                path = (True, x, states[nsid], path)
                                depth += 1
                                if depth > best[2]:
                                    best = (path, states[nsid], depth)
                                entry = nxt[0]
                                continue
                        if not ok:
                            counts[ck] += 1
                            rem.required += 1
                    entry = nxt[entry]
                    continue
                main = False
                r = entry
                icur = inxt[self.ihead]
            # Trying the indeterminate ops invoked before return entry r.
            rpos = ent_pos[r]
            while info_pos[icur] < rpos:
                j = icur
                icur = inxt[j]
                tr = utr[j]
                nsid = tr.get(sid, -2)
                if nsid == -2:
                    c = unknown[j]
                    nsid = _intern(step(states[sid], c.f, c.value, c.completion), states,
                                   sid_of)
                    tr[sid] = nsid
                # An op that cannot happen here, or changes nothing (a read whose outcome is
                # unknown): leaving it out is never worse, it may still happen later.
                if nsid < 0 or nsid == sid:
                    continue
                ns = states[nsid]
                ck = unknown[j].ckey
                counts[ck] -= 1
                if stuck is not None and stuck(ns, rem):
                    if depth >= best[2]:
                        best = ((False, j, ns, path), ns, depth + 1)
                    counts[ck] += 1
                    continue
                if not visit((lo, w, nsid), bits | (1 << j)):
                    counts[ck] += 1
                    continue
                if budget.out_of_states(seen.size):
                    return self._unknown(budget, seen)
                stack.append((False, j, sid, r))
                sid, bits = nsid, bits | (1 << j)
                nxt_j, prv_j = inxt[j], iprv[j]
                inxt[prv_j] = nxt_j
                iprv[nxt_j] = prv_j
                n = sig_next[j]
                if n >= 0:  # its twin, invoked later, now leads: insert it in call order
                    at = nxt_j
                    while info_pos[at] < info_pos[n]:
                        at = inxt[at]
                    before = iprv[at]
                    inxt[before] = n
                    iprv[n] = before
                    inxt[n] = at
                    iprv[at] = n
                path = (False, j, ns, path)
                depth += 1
                if depth > best[2]:
                    best = (path, ns, depth)
                main = True
                entry = nxt[0]
                break
            if main:
                continue
            # Nothing can be linearized here: undo the latest choice.
            if not stack:
                return self._invalid(budget, seen, best, witness)
            frame = stack.pop()
            path = path[3] if path is not None else None
            depth -= 1
            if frame[0]:
                _, x, sid, lo, w = frame
                c = known[x]
                counts[c.ckey] += 1
                rem.required += 1
                ce, re_ = call_ent[x], ret_ent[x]
                nxt[prv[re_]] = re_
                prv[nxt[re_]] = re_
                nxt[prv[ce]] = ce
                prv[nxt[ce]] = ce
                entry = nxt[ce]
                main = True
            else:
                _, j, sid, r = frame
                c = unknown[j]
                counts[c.ckey] += 1
                bits &= ~(1 << j)
                n = sig_next[j]
                if n >= 0:
                    inxt[iprv[n]] = inxt[n]
                    iprv[inxt[n]] = iprv[n]
                inxt[iprv[j]] = j
                iprv[inxt[j]] = j
                icur = inxt[j]
                main = False

    # -- outcomes ----------------------------------------------------------------------------

    def _done(self, budget: Budget, seen: _Seen) -> PartResult:
        budget.states += seen.size
        return PartResult(VALID, self.key, self.calls, seen.size)

    def _unknown(self, budget: Budget, seen: _Seen) -> PartResult:
        budget.states += seen.size
        return PartResult(UNKNOWN, self.key, self.calls, seen.size)

    def _invalid(self, budget: Budget, seen: _Seen,
                 best: tuple[tuple[Any, ...] | None, State, int], witness: bool) -> PartResult:
        budget.states += seen.size
        chain = self.chain(best[0])
        result = PartResult(INVALID, self.key, self.calls, seen.size)
        result.chain, result.state = chain, best[1]
        if witness:
            result.witness = make_witness(self.model, self.key, self.calls, chain, best[1],
                                          init=self.init)
        return result

    def chain(self, node: tuple[Any, ...] | None) -> list[tuple[Call, State]]:
        """The ops of a search path, first to last, each with the state after it."""
        chain: list[tuple[Call, State]] = []
        while node is not None:
            kind, i, st, node = node
            chain.append(((self.known if kind else self.unknown)[i], st))
        chain.reverse()
        return chain
