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
import operator
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


def _move(step: Any, c: Call, state: int, states: list[State], number_of: dict[State, int]
          ) -> int:
    """The number of the state op ``c`` leads to from state number ``state`` (-1: it cannot
    happen there), the model asked (``step``)."""
    return _intern(step(states[state], c.f, c.value, c.completion), states, number_of)


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


_EVENT_ORDER = operator.itemgetter(0, 1, 2)  # time, call before return, seq
ARRAYS_FROM = 5000  # calls: a part this big has its entry lists made by array operations
# (1.7x sooner from 3k calls on; below, the import of numpy may cost more than they save)


class Part:
    """The WGL search over one part (one lock). Build once, then :meth:`search`. ``init``: the
    state to start from (the model's own by default).

    The search works on two doubly linked lists kept as arrays of indices (``next_*`` and
    ``prev_*``), so that taking an op out and putting it back are O(1) and allocate nothing:

    - the **entries**: each op with a known outcome (numbered 0..m-1 in call order) has a call
      entry and a return entry, all 2m in time order; entry 0 is the head, 2m+1 the tail;
    - the **indeterminate ops** (numbered 0..k-1 in call order; k is the head, k+1 the tail):
      only the earliest pending op of each look is in it (see ``twin_after``).
    """

    def __init__(self, key: Hashable, calls: list[Call], model: Model,
                 init: State | None = None) -> None:
        self.key = key
        self.model = model
        self.calls = calls
        self.init: State = model.init if init is None else init
        for c in calls:
            # What :class:`_Remaining` counts it under (refused: it completed as a fail).
            c.ckey = (c.process, c.f, FAIL) if c.refused else (c.process, c.f)
        if len(calls) >= ARRAYS_FROM and self._entries_by_arrays(calls):
            return
        events: list[tuple[int, int, int, Call]] = []  # (time, 0 call | 1 return, seq, op)
        add = events.append
        for c in calls:
            add((c.start, 0, c.seq, c))
            if c.known:
                assert c.end is not None
                add((c.end, 1, c.seq, c))
        events.sort(key=_EVENT_ORDER)
        self._build_lists(events, len(events) - len(calls))

    def _entries_by_arrays(self, calls: list[Call]) -> bool:
        """The lists of :meth:`_build_lists`, made by array operations
        (:mod:`checker.wgl_arrays`: numpy, imported only for a big part); False where they
        cannot be (the walk then makes them)."""
        from checker.wgl_arrays import entry_lists

        got = entry_lists(calls)
        if got is None:
            return False
        self.tail = got.tail
        self.entry_op, self.is_call, self.entry_pos = got.entry_op, got.is_call, got.entry_pos
        self.call_entry, self.return_entry = got.call_entry, got.return_entry
        self._set_lists(got.known, got.unknown, got.info_at, got.events)
        return True

    def _build_lists(self, events: list[tuple[int, int, int, Call]], m: int) -> None:
        """In one walk of the ``events``: the ``m`` known ops numbered 0..m-1 in call order
        (``known``), their entries 1..2m in time order (0 is the head, 2m+1 the tail); the
        indeterminate ops numbered 0..k-1 in call order (``unknown``; k: head, k+1: tail)."""
        self.tail = 2 * m + 1
        entry_op = self.entry_op = [-1] * (2 * m + 2)  # the known op of each entry
        is_call = self.is_call = [False] * (2 * m + 2)  # a call entry; else a return entry
        # Each entry's place among all events (for the info ops).
        entry_pos = self.entry_pos = [0] * (2 * m + 2)
        call_entry = self.call_entry = [0] * m
        return_entry = self.return_entry = [0] * m
        known: list[Call] = []
        unknown: list[Call] = []
        info_at: list[int] = []
        number: dict[int, int] = {}  # a known op's, by seq (seqs are unique in a part)
        e = 0
        for pos, (_, kind, seq, c) in enumerate(events):
            if not c.known:  # (its call: an indeterminate op has no return)
                info_at.append(pos)
                unknown.append(c)
                continue
            e += 1
            if kind == 0:  # (a call comes before its return)
                x = number[seq] = len(known)
                known.append(c)
                call_entry[x] = e
                is_call[e] = True
            else:
                x = number[seq]
                return_entry[x] = e
            entry_op[e] = x
            entry_pos[e] = pos
        entry_pos[self.tail] = len(events)
        self._set_lists(known, unknown, info_at, len(events))

    def _set_lists(self, known: list[Call], unknown: list[Call], info_at: list[int],
                   events: int) -> None:
        """The lists of :meth:`_build_lists` that follow from the numbering of the known ops
        and their entries (set already): the entries' links, and the indeterminate ops' list
        (``info_at``: each one's place among the ``events``)."""
        m = len(known)
        self.known: list[Call] = known
        self.unknown: list[Call] = unknown
        self.next_entry = [*range(1, 2 * m + 2), self.tail]
        self.prev_entry = [0, *range(0, 2 * m + 1)]
        k = len(unknown)
        self.info_head, self.info_tail = k, k + 1
        self.info_pos = [*info_at, -1, events + 1]  # its place among all events
        # Only the earliest pending op of each look is in the list (the others wait for it to
        # be linearized, see ``twin_after``): same-looking pending ops are interchangeable
        # (the process is part of the look unless the model never reads it).
        last: dict[Hashable, int] = {}
        self.twin_after = [-1] * k  # the next op of the same look, invoked later
        leaders = []
        blind = self.model.process_blind
        for j, c in enumerate(self.unknown):
            look = (c.f, freeze(c.value)) if blind else (c.f, freeze(c.value), c.process)
            if look in last:
                self.twin_after[last[look]] = j
            else:
                leaders.append(j)
            last[look] = j
        self.next_info = [self.info_tail] * (k + 2)
        self.prev_info = [self.info_head] * (k + 2)
        for a, b in itertools.pairwise([self.info_head, *leaders, self.info_tail]):
            self.next_info[a] = b
            self.prev_info[b] = a

    def _take_info(self, j: int) -> None:
        """Take indeterminate op ``j`` out of its list (it is linearized); its twin, if any,
        leads its look now: put it in, in call order."""
        next_info, prev_info, info_pos = self.next_info, self.prev_info, self.info_pos
        after, before = next_info[j], prev_info[j]
        next_info[before] = after
        prev_info[after] = before
        twin = self.twin_after[j]
        if twin >= 0:
            at = after
            while info_pos[at] < info_pos[twin]:
                at = next_info[at]
            before = prev_info[at]
            next_info[before] = twin
            prev_info[twin] = before
            next_info[twin] = at
            prev_info[at] = twin

    def _put_info_back(self, j: int) -> None:
        """Undo :meth:`_take_info`: its twin out, ``j`` back where it was."""
        next_info, prev_info = self.next_info, self.prev_info
        twin = self.twin_after[j]
        if twin >= 0:
            next_info[prev_info[twin]] = next_info[twin]
            prev_info[next_info[twin]] = prev_info[twin]
        next_info[prev_info[j]] = j
        prev_info[next_info[j]] = j

    def search(self, budget: Budget, witness: bool = True) -> PartResult:
        """Run the search; return valid / invalid (with a witness, unless ``witness`` is
        False: then only the prefix and the state it ends in) / unknown (budget spent).

        Wing & Gong's search with Lowe's just-in-time linearization: walk the entries from the
        head. A call entry met before any return entry is an op that may take effect now: if
        the model takes it in the current state, and the configuration it leads to (the set of
        linearized ops, the state) is not in the cache, linearize it (take its two entries out
        of the list, push the choice) and walk again from the head. A return entry met first
        is an op that must have taken effect already: try the indeterminate ops invoked before
        it (one of them may have taken effect first, the same way); when none can, pop the
        latest choice, put its op back, and walk on from its call entry. Every known op
        linearized: valid. Nothing left to pop: invalid, the deepest path is the witness.
        """
        model = self.model
        step, stuck = model.step, model.stuck
        known, unknown = self.known, self.unknown
        # The lists, bound to locals: this loop is the checker's hot path.
        next_entry, prev_entry = self.next_entry, self.prev_entry
        entry_op, is_call, entry_pos = self.entry_op, self.is_call, self.entry_pos
        call_entry, return_entry = self.call_entry, self.return_entry
        next_info, info_pos = self.next_info, self.info_pos
        take_info, put_info_back = self._take_info, self._put_info_back
        remaining = _Remaining(self.calls, len(known))
        pending = remaining.counts  # ops not yet linearized, by process and f (Model.stuck)
        # States are interned (a state is its number in ``states``) and each op's transitions
        # are memoised (op -> {state: state after, -1: the op cannot happen there}): the model
        # is asked once per (op, state), however often the search comes back to it.
        states: list[State] = [self.init]
        number_of: dict[State, int] = {self.init: 0}
        known_moves: list[dict[int, int]] = [{} for _ in known]
        info_moves: list[dict[int, int]] = [{} for _ in unknown]
        seen = _Seen()  # the cache of configurations explored
        visit = seen.visit
        # The configuration: the state, and the linearized ops: the known ones below ``low``,
        # those above it as the bits of ``window`` (bit i: op low + i), the indeterminate ones
        # as the bits of ``info_done``.
        state = low = window = info_done = 0
        visit((0, 0, 0), 0)
        # The choices made, to undo: (True, known op, state, low, window before) or (False,
        # indeterminate op, state before, the return entry it was tried for).
        choices: list[tuple[Any, ...]] = []
        path: tuple[Any, ...] | None = None  # cons list of (known?, op, state after, parent)
        deepest: tuple[tuple[Any, ...] | None, State, int] = (None, self.init, 0)
        depth = 0
        entry = next_entry[0]
        on_entries = True  # walking the entries; False: trying indeterminate ops before ...
        blocking = info_at = 0  # ... the return entry ``blocking``, from ``info_at`` on
        steps = 0

        while True:
            steps += 1
            if steps % _CHECK_CLOCK_EVERY == 0 and budget.out_of_time():
                return self._unknown(budget, seen)
            if remaining.required == 0:
                return self._done(budget, seen)
            if on_entries:
                if is_call[entry]:  # may known op x take effect now?
                    x = entry_op[entry]
                    moves = known_moves[x]
                    after = moves.get(state, -2)
                    if after == -2:
                        after = moves[state] = _move(step, known[x], state, states, number_of)
                    if after >= 0:
                        op_key = known[x].ckey
                        pending[op_key] -= 1
                        remaining.required -= 1
                        taken = False
                        if stuck is not None and remaining.required and stuck(states[after],
                                                                               remaining):
                            if depth >= deepest[2]:  # the witness may end in a hopeless state
                                deepest = ((True, x, states[after], path), states[after],
                                           depth + 1)
                        else:
                            # The linearized set with x: when x is op ``low``, the run of
                            # linearized ops from it on moves ``low`` up past them.
                            bit = x - low
                            new_window = window | (1 << bit)
                            new_low = low
                            if bit == 0:
                                run = (~new_window & (new_window + 1)).bit_length() - 1
                                new_window >>= run
                                new_low = low + run
                            if visit((new_low, new_window, after), info_done):
                                if budget.out_of_states(seen.size):
                                    return self._unknown(budget, seen)
                                taken = True
                        if taken:
                            choices.append((True, x, state, low, window))
                            state, low, window = after, new_low, new_window
                            ret = return_entry[x]  # take both its entries out of the list
                            next_entry[prev_entry[entry]] = next_entry[entry]
                            prev_entry[next_entry[entry]] = prev_entry[entry]
                            next_entry[prev_entry[ret]] = next_entry[ret]
                            prev_entry[next_entry[ret]] = prev_entry[ret]
                            path = (True, x, states[after], path)
                            depth += 1
                            if depth > deepest[2]:
                                deepest = (path, states[after], depth)
                            entry = next_entry[0]
                            continue
                        pending[op_key] += 1
                        remaining.required += 1
                    entry = next_entry[entry]
                    continue
                on_entries = False  # a return entry: its op should have taken effect by now
                blocking = entry
                info_at = next_info[self.info_head]
            # Trying the indeterminate ops invoked before the return entry ``blocking``.
            blocking_pos = entry_pos[blocking]
            while info_pos[info_at] < blocking_pos:
                j = info_at
                info_at = next_info[j]
                moves = info_moves[j]
                after = moves.get(state, -2)
                if after == -2:
                    after = moves[state] = _move(step, unknown[j], state, states, number_of)
                # An op that cannot happen here, or changes nothing (a read whose outcome is
                # unknown): leaving it out is never worse, it may still happen later.
                if after < 0 or after == state:
                    continue
                after_state = states[after]
                op_key = unknown[j].ckey
                pending[op_key] -= 1
                if stuck is not None and stuck(after_state, remaining):
                    if depth >= deepest[2]:
                        deepest = ((False, j, after_state, path), after_state, depth + 1)
                    pending[op_key] += 1
                    continue
                if not visit((low, window, after), info_done | (1 << j)):
                    pending[op_key] += 1
                    continue
                if budget.out_of_states(seen.size):
                    return self._unknown(budget, seen)
                choices.append((False, j, state, blocking))
                state, info_done = after, info_done | (1 << j)
                take_info(j)
                path = (False, j, after_state, path)
                depth += 1
                if depth > deepest[2]:
                    deepest = (path, after_state, depth)
                on_entries = True
                entry = next_entry[0]
                break
            if on_entries:
                continue
            # Nothing can be linearized here: undo the latest choice.
            if not choices:
                return self._invalid(budget, seen, deepest, witness)
            choice = choices.pop()
            path = path[3] if path is not None else None
            depth -= 1
            if choice[0]:  # a known op: its entries back in the list, walk on after its call
                _, x, state, low, window = choice
                pending[known[x].ckey] += 1
                remaining.required += 1
                call, ret = call_entry[x], return_entry[x]
                next_entry[prev_entry[ret]] = ret
                prev_entry[next_entry[ret]] = ret
                next_entry[prev_entry[call]] = call
                prev_entry[next_entry[call]] = call
                entry = next_entry[call]
                on_entries = True
            else:  # an indeterminate op: back in its list, try the ones after it
                _, j, state, blocking = choice
                pending[unknown[j].ckey] += 1
                info_done &= ~(1 << j)
                put_info_back(j)
                info_at = next_info[j]
                on_entries = False

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
