"""The witness of a non-linearizable history, for people: the longest linearizable prefix
found, the op that cannot follow it, the ops concurrent with it, and why, in words.

Where it happened: the search gets stuck at the op it cannot place (``blocked``), which may
have completed long before the anomaly shows (an acquire that completed at 1.1 s cannot be
placed because a slower acquire, granted at 3.2 s, had to go first). The conflict is between
the blocked op and the op of the prefix that put the model in the state it cannot follow
(``setter``): ``from`` is the later of their completions, ``until`` the next op either process
invoked after that (seconds), ``processes`` the two. The tail of the prefix, with the model's
state after each op (``linearization``), lets a reader follow the search to where it stopped.

Pure: no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Iterable, Iterator, Sequence

from checker.calls import Call
from checker.models import Model, OpView, State, secs
from harness.core.text import show, who

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any, overload


LINEARIZATION_ROWS = 40  # the tail of the prefix listed with the model's state after each op
CONCURRENT_ROWS = 20  # concurrent ops listed whole (all are counted in ``concurrent``)


def make_witness(model: Model, key: Hashable, calls: Sequence[Call],
                 chain: list[tuple[Call, State]], state: State, blocked: Call | None = None,
                 init: State | None = None) -> dict[str, Any]:
    """The witness for the part ``key`` (its ``calls``): ``chain`` is the linearizable prefix
    as (op, state after it), from ``init`` (the model's by default), ``state`` the state it
    ends in; ``blocked``, the op that cannot follow it, is by default the op with a known
    outcome that completed first among those not in the prefix."""
    done = bytearray(max((c.seq for c in calls), default=0) + 1)  # in the prefix, by seq
    for c, _ in chain:
        done[c.seq] = 1
    if blocked is None:
        blocked = min((c for c in calls if c.known and not done[c.seq]),
                      key=lambda c: (c.end, c.seq))
    assert blocked.end is not None
    setter = last_change(model.init if init is None else init, chain)
    # Pending at the blocked op's return: every known op invoked by then, and the
    # indeterminate ops invoked since the prefix last changed state (older ones are only
    # counted: they have been pending all along and list badly).
    since = min(blocked.start, setter.start if setter is not None else blocked.start)
    pending = [c for c in calls if not done[c.seq] and c is not blocked
               and c.start <= blocked.end]
    concurrent = sorted((c for c in pending if c.known or c.start >= since),
                        key=lambda c: (c.start, c.seq))
    older = len(pending) - len(concurrent)
    prefix = [c for c, _ in chain]
    return assemble(
        model, key, len(calls), state, blocked, setter,
        concurrent=[c.index for c in concurrent], older=older,
        head=concurrent[:CONCURRENT_ROWS],
        prefix=[i if type(i := c.inv.get("index")) is int else c.seq for c in prefix],
        span=conflict(calls, blocked, setter), tail=chain[-LINEARIZATION_ROWS:],
        chain=len(chain), explanation=explain(model, key, calls, state, blocked, prefix))


def assemble(model: Model, key: Hashable, ops: int, state: State, blocked: Call,
             setter: Call | None, *, concurrent: list[int], older: int, head: list[Call],
             prefix: list[int], span: tuple[int, int, list[Any]],
             tail: list[tuple[Call, State]], chain: int, explanation: str) -> dict[str, Any]:
    """The witness of :func:`make_witness` from what it found: the part's number of ``ops``;
    the indexes of the ``concurrent`` ops (the first of them, ``head``, listed whole) and of
    the ``prefix``; the conflict's ``span`` (:func:`conflict`); the ``tail`` of the ``chain``
    (its length)."""
    involved = {blocked.index, *concurrent}
    if setter is not None:
        involved.add(setter.index)
    start, until, procs = span
    return {
        "lock": jsonable(key),
        "part_ops": ops,
        "ops": sorted(involved),
        "prefix": prefix,
        "prefix_state": model.describe(state),
        "state": jsonable(state),
        "blocked": [blocked.index],
        "blocked_op": summary(blocked),
        "concurrent": concurrent,
        "concurrent_ops": [summary(c) for c in head],
        "older_indeterminate": older,
        "from": round(start / 1e9, 6),
        "until": round(until / 1e9, 6),
        "processes": procs,
        "setter": None if setter is None else setter.index,
        "linearization": [{**summary(c), "state": model.describe(st)} for c, st in tail],
        "linearization_from": chain - len(tail),
        "explanation": explanation,
    }


def conflict(calls: Sequence[Call], blocked: Call, setter: Call | None
             ) -> tuple[int, int, list[Any]]:
    """When the conflict the witness explains was visible (ns): from the later completion of
    ``blocked`` and ``setter`` (the op that set the state ``blocked`` cannot follow) until
    the first op either of their processes invoked after it; and the processes involved."""
    assert blocked.end is not None
    ends = [blocked.end] + ([setter.end] if setter is not None and setter.end is not None
                            else [])
    start = max(ends)
    procs = [blocked.process] if setter is None else [setter.process, blocked.process]
    after = [c.start for c in calls if c.process in procs and c.start > start]
    ordered = list(dict.fromkeys(procs))
    return start, min(after, default=start), ordered


def last_change(init: State, chain: Iterable[tuple[Call, State]]) -> Call | None:
    """The last op of ``chain`` that changed the state (from ``init``)."""
    prev = init
    setter = None
    for c, st in chain:
        if st != prev:
            setter = c
        prev = st
    return setter


class _Views(Sequence[OpView]):
    """Ops as the model's ``explain`` reads them (:class:`OpView`), each made when it is read:
    a witness for a million-op part reads a few of them."""

    def __init__(self, calls: Sequence[Call]) -> None:
        self.calls = calls

    def __len__(self) -> int:
        return len(self.calls)

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, i: int) -> OpView: ...

        @overload
        def __getitem__(self, i: slice) -> list[OpView]: ...

    def __getitem__(self, i: int | slice) -> OpView | list[OpView]:
        if isinstance(i, slice):
            return [c.view() for c in self.calls[i]]
        return self.calls[i].view()

    def __iter__(self) -> Iterator[OpView]:
        return (c.view() for c in self.calls)

    def __reversed__(self) -> Iterator[OpView]:
        return (c.view() for c in reversed(self.calls))


def explain(model: Model, key: Hashable, calls: Sequence[Call], state: State, blocked: Call,
            prefix: Sequence[Call], by_start: Sequence[Call] | None = None) -> str:
    """Why ``blocked`` cannot follow ``prefix`` (the model's words, when it has some);
    ``by_start``: ``calls`` sorted by invocation (stable), when the caller has them so."""
    lock = "" if key is None else f"on lock {show(jsonable(key))} "
    if model.explain is not None:
        if by_start is None:
            by_start = sorted(calls, key=operator.attrgetter("start"))
        part = _Views(by_start)
        try:
            core = model.explain(state, blocked.view(), _Views(prefix), part)
        except Exception as e:  # words are a courtesy: never lose the verdict over them
            core = (f"{who(blocked.process)}'s {blocked.f} completed at "
                    f"{secs(blocked.end)} but cannot take effect when "
                    f"{model.describe(state)} (explain failed: {type(e).__name__}: {e})")
    else:
        core = (f"{who(blocked.process)}'s {blocked.f} completed at {secs(blocked.end)} "
                f"but cannot take effect when {model.describe(state)}")
    ops = "op" if len(prefix) == 1 else "ops"
    return (f"{core}. No order of the {len(calls)} ops {lock}explains it: the longest "
            f"linearizable prefix the search found has {len(prefix)} {ops}, after which "
            f"{model.describe(state)}, and no op concurrent with this one can be placed "
            "first to make room for it.")


def summary(c: Call) -> dict[str, Any]:
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


def jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value
