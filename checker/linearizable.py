"""Linearizability checking: the Wing & Gong search with Lowe's cache, P-compositional.

``check(history, model)`` decides whether the ops of a history can be put in one sequential
order that (1) respects real time: an op that completed before another was invoked comes
first, and (2) the model accepts (``checker.models``). It returns a dict, with a witness that a
person can read when the answer is no.

How (the algorithm of Wing & Gong, with Lowe's improvements, as in Knossos and Porcupine):

- The history is split by lock (the op's ``lock`` field, else ``key``): a history is
  linearizable iff every part is (P-compositionality), and small parts are far cheaper.
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
never happened, from holding the lock forever in the model.) Three things keep them cheap:

- they are tried only after the ops with a known outcome (a valid history is usually found
  without ever touching them);
- two pending indeterminate ops that look the same to the model (same f, value and process) are
  interchangeable, so only the earliest of them is ever tried;
- a model may declare a state hopeless (``Model.stuck``: a lock held by a process that never
  releases again, while other processes still need it); the search does not enter it.

The set of linearized ops is kept compactly: ops with a known outcome are numbered in call
order, and the set is (the lowest op not yet linearized, bitmask of the linearized ops above
it): a window as wide as the ops concurrent with that op, not as the whole history. Indeterminate
ops have a bitmask of their own. The cache key is that pair with the model state, exact (no
hashing of states into fingerprints, so no false "already seen").

Pure: no I/O; the only clock is ``time.monotonic``, read for the time budget.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

from checker.models import Model, OpView, State, freeze, get_model, secs
from checker.sessions import writes_in_lock_transaction
from harness.core.history import FAIL, INVOKE, NEMESIS, OK, Op, pairs
from harness.core.text import show, who

VALID = True
INVALID = False
UNKNOWN = "unknown"

_CHECK_CLOCK_EVERY = 1024


# ---------------------------------------------------------------------------------------------
# Preparing the history


class Call:
    """One operation as the search sees it: invocation, outcome and real-time window (ns)."""

    __slots__ = ("ckey", "comp", "completion", "end", "f", "inv", "known", "process", "seq",
                 "start", "value")

    def __init__(self, inv: Op, comp: Op | None, known: bool, f: str, value: Any,
                 completion: dict[str, Any], start: int, end: int | None, seq: int,
                 process: Any) -> None:
        self.inv = inv
        self.comp = comp
        self.known = known  # completed ok (or failed as the model understands); else unknown
        self.f = f
        self.value = value
        self.completion = completion
        self.start = start
        self.end = end
        self.seq = seq  # position of the invocation in the history, to break ties
        self.process = process
        failed = comp is not None and known and comp.get("type") == FAIL
        # what :class:`_Remaining` counts it under
        self.ckey: tuple[Any, ...] = (process, f, FAIL) if failed else (process, f)

    def __repr__(self) -> str:
        return f"Call({self.process!r} {self.f} {self.value!r} {self.start}..{self.end})"

    @property
    def index(self) -> int:
        idx = self.inv.get("index")
        return idx if isinstance(idx, int) and not isinstance(idx, bool) else self.seq

    def view(self) -> OpView:
        done = self.comp
        token = (done or {}).get("token", self.inv.get("token"))
        return OpView(
            index=self.index,
            process=self.process,
            f=self.f,
            value=self.value,
            output=done.get("value") if (done is not None and self.known) else None,
            type=str(done["type"]) if (done is not None and self.known) else "info",
            invoked=self.start,
            completed=self.end,
            token=token,
        )


class Prepared:
    """The history split into parts, and what was left out of the check and why."""

    def __init__(self, parts: dict[Hashable, list[Call]]) -> None:
        self.parts = parts
        self.failed = 0
        self.ignored: dict[str, int] = {}
        self.unmatched = 0


def partition_key(inv: Op, comp: Op | None) -> Hashable:
    """The independent object an op works on: its ``lock``, else its ``key`` (None: one part)."""
    for op in (inv, comp):
        if op is None:
            continue
        for name in ("lock", "key"):
            if op.get(name) is not None:
                return freeze(op[name])
    return None


def prepare(history: Sequence[Op], model: Model) -> Prepared:
    """Pair invocations with completions and split them by lock; drop fails and nemesis ops."""
    seq_of = {id(op): i for i, op in enumerate(history)}
    prepared = Prepared(parts={})
    for inv, comp in pairs(op for op in history if op.get("process") != NEMESIS):
        if inv.get("type") != INVOKE:
            prepared.unmatched += 1
            continue
        f = inv["f"]
        failed = comp is not None and comp.get("type") == FAIL
        if failed and (model.understood_failure is None
                       or not model.understood_failure({**comp, "f": f})):
            prepared.failed += 1  # it certainly did not happen: nothing to place
            continue
        if f not in model.fs:
            prepared.ignored[f] = prepared.ignored.get(f, 0) + 1
            continue
        # A failure the model understands (a release refused: "not the holder") happened,
        # with that outcome, within its window: it is placed like an ok op.
        known = comp is not None and comp.get("type") in (OK, FAIL)
        process = inv["process"]
        start = int(inv["time"])
        call = Call(
            inv=inv,
            comp=comp,
            known=known,
            f=f,
            value=inv.get("value"),
            completion=comp if (known and comp is not None)
            else {"type": "info", "process": process, "f": f},
            start=start,
            end=max(int(comp["time"]), start) if (known and comp is not None) else None,
            seq=seq_of[id(inv)],
            process=process,
        )
        prepared.parts.setdefault(partition_key(inv, comp), []).append(call)
    return prepared


# ---------------------------------------------------------------------------------------------
# The search


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
    """The verdict on one part (lock), its ops, cache entries used, and the witness if false."""

    def __init__(self, valid: bool | str, key: Hashable, calls: list[Call], states: int,
                 witness: dict[str, Any] | None = None) -> None:
        self.valid = valid
        self.key = key
        self.calls = calls
        self.states = states
        self.witness = witness


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


class _Part:
    """The WGL search over one part (one lock). Build once, then :meth:`search`."""

    def __init__(self, key: Hashable, calls: list[Call], model: Model) -> None:
        self.key = key
        self.model = model
        self.calls = calls
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

    def search(self, budget: Budget) -> PartResult:
        """Run the search; return valid / invalid (with a witness) / unknown (budget spent)."""
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
        states: list[State] = [model.init]
        sid_of: dict[State, int] = {model.init: 0}
        ktr: list[dict[int, int]] = [{} for _ in known]
        utr: list[dict[int, int]] = [{} for _ in unknown]
        seen = _Seen()
        visit = seen.visit

        sid = 0
        lo = w = bits = 0  # known ops below lo all linearized; w: those above; bits: info ops
        visit((0, 0, 0), 0)
        stack: list[tuple[Any, ...]] = []
        path: tuple[Any, ...] | None = None  # cons list of (kind, id, state after, parent)
        best: tuple[tuple[Any, ...] | None, State, int] = (None, model.init, 0)
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
                return self._invalid(budget, seen, best)
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
                 best: tuple[tuple[Any, ...] | None, State, int]) -> PartResult:
        budget.states += seen.size
        witness = self._witness(best)
        return PartResult(INVALID, self.key, self.calls, seen.size, witness)

    # -- the witness -------------------------------------------------------------------------

    def _witness(self, best: tuple[tuple[Any, ...] | None, State, int]) -> dict[str, Any]:
        """The longest linearizable prefix, the op that cannot follow it, and why, in words."""
        chain: list[tuple[Call, State]] = []
        node = best[0]
        while node is not None:
            kind, i, st, node = node
            chain.append(((self.known if kind else self.unknown)[i], st))
        chain.reverse()
        state = best[1]
        done = {id(c) for c, _ in chain}
        blocked = min((c for c in self.known if id(c) not in done),
                      key=lambda c: (c.end, c.seq))
        assert blocked.end is not None
        setter = self._last_change(chain)
        # Pending at the blocked op's return: every known op invoked by then, and the
        # indeterminate ops invoked since the prefix last changed state (older ones are only
        # counted: they have been pending all along and list badly).
        since = min(blocked.start, setter.start if setter is not None else blocked.start)
        pending = [c for c in self.calls if id(c) not in done and c is not blocked
                   and c.start <= blocked.end]
        concurrent = sorted((c for c in pending if c.known or c.start >= since),
                            key=lambda c: (c.start, c.seq))
        older = len(pending) - len(concurrent)
        involved = {blocked.index, *(c.index for c in concurrent)}
        if setter is not None:
            involved.add(setter.index)
        prefix_views = [c for c, _ in chain]
        words = self._explain(state, blocked, prefix_views)
        return {
            "lock": _jsonable(self.key),
            "part_ops": len(self.calls),
            "ops": sorted(involved),
            "prefix": [c.index for c, _ in chain],
            "prefix_state": self.model.describe(state),
            "state": _jsonable(state),
            "blocked": [blocked.index],
            "blocked_op": _summary(blocked),
            "concurrent": [c.index for c in concurrent],
            "older_indeterminate": older,
            "explanation": words,
        }

    def _last_change(self, chain: list[tuple[Call, State]]) -> Call | None:
        prev = self.model.init
        setter = None
        for c, st in chain:
            if st != prev:
                setter = c
            prev = st
        return setter

    def _explain(self, state: State, blocked: Call, prefix: list[Call]) -> str:
        model = self.model
        lock = "" if self.key is None else f"on lock {show(_jsonable(self.key))} "
        if model.explain is not None:
            views = [c.view() for c in prefix]
            part = sorted((c.view() for c in self.calls), key=lambda v: v.invoked)
            try:
                core = model.explain(state, blocked.view(), views, part)
            except Exception as e:  # words are a courtesy: never lose the verdict over them
                core = (f"{who(blocked.process)}'s {blocked.f} completed at "
                        f"{secs(blocked.end)} but cannot take effect when "
                        f"{model.describe(state)} (explain failed: {type(e).__name__}: {e})")
        else:
            core = (f"{who(blocked.process)}'s {blocked.f} completed at {secs(blocked.end)} "
                    f"but cannot take effect when {model.describe(state)}")
        ops = "op" if len(prefix) == 1 else "ops"
        return (f"{core}. No order of the {len(self.calls)} ops {lock}explains it: the longest "
                f"linearizable prefix the search found has {len(prefix)} {ops}, after which "
                f"{model.describe(state)}, and no op concurrent with this one can be placed "
                "first to make room for it.")


def _summary(c: Call) -> dict[str, Any]:
    return {
        "index": c.index,
        "process": c.process,
        "f": c.f,
        "value": c.value,
        "type": str(c.comp["type"]) if (c.comp is not None and c.known) else "info",
        "output": c.comp.get("value") if (c.comp is not None and c.known) else None,
        "invoked_s": round(c.start / 1e9, 6),
        "completed_s": None if c.end is None else round(c.end / 1e9, 6),
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# The public function


def check(history: Sequence[Op], model: str | Model = "mutex", *,
          time_limit: float | None = None, max_states: int | None = None) -> dict[str, Any]:
    """Is ``history`` linearizable with respect to ``model``? A pure function.

    ``time_limit`` (seconds) and ``max_states`` (cache entries over all parts) bound the work:
    when either runs out the answer is ``"unknown"`` (unless a part was already found invalid:
    false wins over unknown). Returns ``{"valid": True|False|"unknown", "model", "parts",
    "ops", "indeterminate", "failed", "ignored", "states", ...}`` and, when invalid,
    ``"witness"`` for the smallest failing part (see :meth:`_Part._witness`) and
    ``"invalid_parts"``; when unknown, ``"reason"`` and ``"unknown_parts"``.
    """
    m = get_model(model)
    prepared = prepare(history, m)
    budget = Budget(time_limit, max_states)
    parts = sorted(prepared.parts.items(), key=lambda kv: (len(kv[1]), repr(kv[0])))
    results: list[PartResult] = []
    for key, calls in parts:
        if budget.reason is not None:
            results.append(PartResult(UNKNOWN, key, calls, 0))
            continue
        results.append(_Part(key, calls, m).search(budget))
    return _summarize(m, prepared, results, budget)


def _summarize(model: Model, prepared: Prepared, results: list[PartResult],
               budget: Budget) -> dict[str, Any]:
    all_calls = [c for r in results for c in r.calls]
    out: dict[str, Any] = {
        "valid": VALID,
        "model": model.name,
        "parts": len(results),
        "ops": len(all_calls),
        "indeterminate": sum(1 for c in all_calls if not c.known),
        "failed": prepared.failed,
        "ignored": dict(sorted(prepared.ignored.items())),
        "states": sum(r.states for r in results),
    }
    if prepared.unmatched:
        out["unmatched_completions"] = prepared.unmatched
    invalid = [r for r in results if r.valid is INVALID]
    unknown = [r for r in results if r.valid == UNKNOWN]
    if not all_calls:
        out["valid"] = UNKNOWN
        left = ", ".join(f"{n} {f}" for f, n in sorted(prepared.ignored.items())) or "none"
        out["reason"] = (f"no op of the {model.name} model ({', '.join(sorted(model.fs))}) to "
                         f"check: nothing was tested (ops left out: {left})")
        return out
    if invalid:
        smallest = min(invalid, key=lambda r: len(r.calls))
        out["valid"] = INVALID
        out["invalid_parts"] = [_jsonable(r.key) for r in invalid]
        out["witness"] = smallest.witness
    elif unknown:
        out["valid"] = UNKNOWN
        out["reason"] = budget.reason or "search budget exhausted"
    if unknown:
        out["unknown_parts"] = [_jsonable(r.key) for r in unknown]
    return out


LOCK_BUDGET_S = 60.0


def check_lock(history: Sequence[Op], *, model: str = "mutex", informational: bool = False,
               time_limit: float = LOCK_BUDGET_S, max_states: int | None = None
               ) -> dict[str, Any]:
    """Is the lock itself linearizable (as ``model``)? ``informational``: the resource protects
    itself (the fenced workload), so, like lock overlaps, the lock's own verdict is reported
    but does not decide the run's. So it is when every write went through the lock's own
    transaction: they commit with the lock or not at all."""
    result = check(history, model, time_limit=time_limit, max_states=max_states)
    informational = informational or writes_in_lock_transaction(history)
    if informational and result["valid"] is not True:
        result = {**result, "lock-valid": result["valid"], "valid": True, "informational": True}
    return result


class LinearizableChecker:
    budgeted: ClassVar[bool] = True  # takes time_limit (and max_states) from the run
    name: ClassVar[str] = "linearizable"
    summary: ClassVar[str] = ("the lock's history against a sequential model (mutex, "
                              "fenced-mutex): Wing & Gong search, P-compositional")
    check = staticmethod(check_lock)
