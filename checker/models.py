"""Sequential specifications for the linearizability checker (``checker.linearizable``).

A model is a pure state machine. Its state is a small immutable, hashable value (always a
tuple here, so that "no state" can never be confused with a state); the checker caches
``(set of linearized ops, state)`` pairs, so states must compare and hash by value.

``step(state, f, value, completion) -> new state | None`` applies one operation:

- ``f``: the op's function (``"acquire"``, ``"read"``, ...), from the invocation;
- ``value``: the invocation's value (what the client asked for: the value to write, ...);
- ``completion``: the completion op dict. For an ``ok`` op it is the real completion (its
  ``value`` is the output, ``token`` the fencing token, ...). For an indeterminate op (``info``,
  or an invocation that never completed) it is a minimal ``{"type": "info", "process": p, "f": f}``:
  the output is unknown, so the model must not look at it, and the op simply takes effect if
  the model allows it. Whether it happened at all is the checker's business, not the model's.
- ``None`` means "this op cannot happen in this state" (a read that returns the wrong value,
  an acquire of a held lock). ``fail`` ops never reach a model: they certainly did not happen.

Adding a model: write a ``step``, a ``describe`` (state in words), optionally an ``explain``
(why the op the checker got stuck on cannot be placed, in words, for the witness; it is given
the state, that op, the linearized prefix and every op of the part in invocation order, as
sequences whose items are made as they are read) and a
``stuck`` hint (a sound "nothing can ever follow from this state" test that prunes the
search; it is asked only while ops with a known outcome remain), then register a
:class:`Model` in :data:`MODELS`. Ops whose ``f`` is not in the model's ``fs`` are not the
model's business and are left out of the check (the mutex workload also
records ``write`` ops to the protected resource, which the ``mutex`` model does not describe).
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
from collections.abc import Callable, Hashable, Iterator, Sequence

from harness.core.text import show, who

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from typing import Any, Protocol

    State = tuple[Any, ...]
    Step = Callable[[State, str, Any, dict[str, Any]], State | None]
else:
    State = tuple


class OpView:
    """One operation as the witness talks about it (times in ns; ``completed`` None: unknown)."""

    __slots__ = ("completed", "f", "index", "invoked", "output", "process", "token", "type",
                 "value")

    def __init__(self, index: int, process: Any, f: str, value: Any, output: Any, type: str,
                 invoked: int, completed: int | None, token: Any = None) -> None:
        self.index = index
        self.process = process
        self.f = f
        self.value = value
        self.output = output
        self.type = type
        self.invoked = invoked
        self.completed = completed
        self.token = token

    def __repr__(self) -> str:
        return (f"OpView({self.index}: {self.process!r} {self.type} {self.f} {self.value!r} "
                f"-> {self.output!r})")

    @property
    def indeterminate(self) -> bool:
        return self.type != "ok"


if TYPE_CHECKING:
    class Remaining(Protocol):
        """What is still to be linearized, for :attr:`Model.stuck`."""

        @property
        def required(self) -> int:
            """How many ops with a known outcome (``ok``) are not linearized yet."""
            ...

        def count(self, process: Any, f: str) -> int:
            """How many ops of ``process`` with function ``f`` (whatever their outcome)
            remain."""
            ...

        def failed(self) -> int:
            """How many ops with a failure the model understands (``failed_fs``) remain:
            they can be placed in any state."""
            ...

    Explain = Callable[[State, OpView, Sequence[OpView], Sequence[OpView]], str]
    Stuck = Callable[[State, Remaining], bool]


class Model:
    """A sequential specification. See the module docstring for the contract of each part.
    Made once per model and never changed."""

    __slots__ = ("describe", "doc", "explain", "fs", "init", "name", "process_blind", "step",
                 "stuck", "understood_failure")

    def __init__(self, name: str, doc: str, init: State, fs: frozenset[str], step: Step,
                 describe: Callable[[State], str], explain: Explain | None = None,
                 stuck: Stuck | None = None,
                 understood_failure: Callable[[dict[str, Any]], bool] | None = None,
                 process_blind: bool = False) -> None:
        self.name = name
        self.doc = doc
        self.init = init
        self.fs = fs
        self.step = step
        self.describe = describe
        self.explain = explain
        self.stuck = stuck
        # Failures that are events of the model, placed like an ok op (a release refused
        # because the lock was no longer the caller's); every other fail certainly did not
        # happen and is left out.
        self.understood_failure = understood_failure
        # The model never looks at the process of an op (a register): indeterminate ops that
        # differ only by process are interchangeable, and the search tries only one of them.
        self.process_blind = process_blind

    def replace(self, **changes: Any) -> Model:
        """A copy with ``changes`` (keyword arguments of the constructor)."""
        return Model(**{**{k: getattr(self, k) for k in self.__slots__}, **changes})

    def __repr__(self) -> str:
        return f"Model({self.name!r})"


def freeze(value: Any) -> Hashable:
    """A hashable copy of a JSON-like value (lists become tuples, dicts sorted item tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return ("__map__", *sorted(((str(k), freeze(v)) for k, v in value.items()),
                                   key=lambda kv: kv[0]))
    if isinstance(value, set | frozenset):
        return ("__set__", *sorted((freeze(v) for v in value), key=repr))
    scalar: Hashable = value
    return scalar


def secs(ns: int | None) -> str:
    """A time for people: seconds since the test started, ms resolution; or, while the times
    are positions (:func:`times_are_positions`), the position."""
    if ns is None:
        return "an unknown time"
    return f"position {ns}" if _POSITIONS.get() else f"{ns / 1e9:.3f} s"


_POSITIONS = contextvars.ContextVar("positions", default=False)


@contextlib.contextmanager
def times_are_positions(yes: bool = True) -> Iterator[None]:
    """While a history whose ``time`` is each op's position in its file (a file with no times:
    a Jepsen log, a Knossos history) is checked and explained: what would be shown as seconds
    is shown as the position it is, never as a time the file does not hold."""
    token = _POSITIONS.set(yes)
    try:
        yield
    finally:
        _POSITIONS.reset(token)




# ---------------------------------------------------------------------------------------------
# mutex and fenced-mutex


NOT_HELD = ("not-held", "not the holder")  # how a refused release says why (ours, Jepsen's)


def refused_not_held(completion: dict[str, Any]) -> bool:
    """A release or extend that failed because the caller did not hold the lock (its lease had
    expired, or somebody else had it): ``error`` ``"not-held..."`` (Jepsen's ``:not-held``),
    as our workloads record a release that returned False."""
    error = completion.get("error")
    return (completion.get("f") in ("release", "extend") and isinstance(error, str)
            and error.startswith(NOT_HELD))


def lost(state: State, p: Any) -> State:
    """A release or extend by ``p`` that failed ("not the holder"): the lock was not ``p``'s
    when it was refused. A lease that expired frees the lock silently; the refusal is where
    the history learns it. The lock is then free if ``p`` was its holder, else unchanged."""
    return (None, *state[1:]) if state[0] == p else state


def mutex_step(state: State, f: str, value: Any, completion: dict[str, Any]) -> State | None:
    """State ``(holder,)``: None when free. Only the holder may release (or extend); a refused
    release or extend says the lock had been lost (:func:`lost`)."""
    holder = state[0]
    p = completion["process"]
    if f == "acquire":
        return (p,) if holder is None else None
    if completion.get("type") == "fail":
        return lost(state, p) if f in ("release", "extend") else None
    if f == "release":
        return (None,) if holder == p else None
    if f == "extend":
        return state if holder == p else None
    return None


def fenced_step(state: State, f: str, value: Any, completion: dict[str, Any]) -> State | None:
    """State ``(holder, highest token granted)``. A grant's token must exceed every earlier one.

    The token comes from the ok completion's ``token`` field. An indeterminate acquire, or a
    grant that carries no token, takes the lock without telling its token: it constrains nothing.
    """
    holder, top = state
    p = completion["process"]
    if completion.get("type") == "fail":
        return lost(state, p) if f in ("release", "extend") else None
    if f == "acquire":
        if holder is not None:
            return None
        token = completion.get("token") if completion.get("type") == "ok" else None
        if token is None or isinstance(token, bool) or not isinstance(token, int | float):
            return (p, top)
        if top is not None and token <= top:
            return None
        return (p, token)
    if f == "release":
        return (None, top) if holder == p else None
    if f == "extend":
        return state if holder == p else None
    return None


def mutex_describe(state: State) -> str:
    holder = state[0]
    text = "the lock is free" if holder is None else f"the lock is held by {who(holder)}"
    if len(state) > 1 and state[1] is not None:
        text += f" (highest token granted so far: {state[1]})"
    return text


def lock_stuck(state: State, remaining: Remaining) -> bool:
    """Held by a process that has no release left: only its own extends, and refused releases
    (which fit any state), could still follow."""
    holder = state[0]
    if holder is None or remaining.count(holder, "release"):
        return False
    return remaining.required > remaining.count(holder, "extend") + remaining.failed()


def _last(prefix: Sequence[OpView], pred: Callable[[OpView], bool]) -> OpView | None:
    for op in reversed(prefix):
        if pred(op):
            return op
    return None


def _next(part: Sequence[OpView], after: int, pred: Callable[[OpView], bool]) -> OpView | None:
    """The first op of ``part`` (in invocation order) invoked at ``after`` or later that
    ``pred`` accepts."""
    for i in range(bisect.bisect_left(part, after, key=lambda op: op.invoked), len(part)):
        if pred(part[i]):
            return part[i]
    return None


def _acquired_phrase(op: OpView) -> str:
    if op.completed is None:
        return (f"whose acquire (invoked at {secs(op.invoked)}, outcome unknown) may have "
                "taken effect")
    return f"which acquired at {secs(op.completed)}"


def _release_note(holder: Any, since: int, part: Sequence[OpView]) -> str:
    rel = _next(part, since, lambda o: o.process == holder and o.f == "release")
    if rel is None:
        return "it never released in this history"
    if rel.completed is None:
        return f"its next release, invoked at {secs(rel.invoked)}, has an unknown outcome"
    return f"its next release was invoked at {secs(rel.invoked)}"


def mutex_explain(state: State, blocked: OpView, prefix: Sequence[OpView],
                  part: Sequence[OpView]) -> str:
    """Why ``blocked`` cannot be placed after ``prefix``, naming the processes involved."""
    holder = state[0]
    p = blocked.process
    when = secs(blocked.completed)
    if blocked.f == "acquire":
        if holder is None:
            return _free_acquire_explain(state, blocked, prefix)
        grant = _last(prefix, lambda o: o.f == "acquire" and o.process == holder)
        since = grant.invoked if grant is not None else 0
        if holder == p:
            return (f"{who(p)} acquired at {when} (invoked at {secs(blocked.invoked)}) while it "
                    "already held the lock and had not released it")
        if (grant is not None and grant.completed is not None and blocked.completed is not None
                and grant.completed > blocked.completed):
            # The two grants overlap in time: whichever goes first, the other one is the anomaly.
            mine = _release_note(p, blocked.invoked, part).replace("it ", "", 1)
            return (f"{who(p)} acquired at {when} (invoked at {secs(blocked.invoked)}) and "
                    f"{who(holder)} acquired at {secs(grant.completed)} (invoked at "
                    f"{secs(grant.invoked)}): both were granted the lock, and neither had "
                    f"released it before the other's grant ({who(p)}: {mine}; {who(holder)}: "
                    f"{_release_note(holder, since, part).replace('it ', '', 1)})")
        held = _acquired_phrase(grant) if grant is not None else "which held the lock"
        return (f"{who(p)} acquired at {when} (invoked at {secs(blocked.invoked)}) while "
                f"{who(holder)}, {held}, had not released ({_release_note(holder, since, part)})")
    if blocked.f in ("release", "extend"):
        verb = "released" if blocked.f == "release" else "extended"
        if holder is None:
            last = _last(prefix, lambda o: o.f == "release")
            free = (f"; the last release was by {who(last.process)}, invoked at "
                    f"{secs(last.invoked)}" if last is not None else "")
            return (f"{who(p)} {verb} the lock at {when} (invoked at {secs(blocked.invoked)}) "
                    f"but did not hold it: the lock was free{free}")
        grant = _last(prefix, lambda o: o.f == "acquire" and o.process == holder)
        held = _acquired_phrase(grant) if grant is not None else "which held the lock"
        return (f"{who(p)} {verb} the lock at {when} (invoked at {secs(blocked.invoked)}) "
                f"while {who(holder)}, {held}, held it")
    return f"{who(p)}'s {blocked.f} at {when} is not allowed when {mutex_describe(state)}"


def _free_acquire_explain(state: State, blocked: OpView, prefix: Sequence[OpView]) -> str:
    """An acquire of a free lock is refused for a stale token, or because nothing can follow."""
    top = state[1] if len(state) > 1 else None
    token = blocked.token
    stale = (top is not None and isinstance(token, int | float) and not isinstance(token, bool)
             and token <= top)
    if not stale:
        return (f"{who(blocked.process)} acquired at {secs(blocked.completed)} and never "
                "released the lock afterwards, yet other operations on the lock that completed "
                "ok still have to be placed after that grant")
    who_top = _last(prefix, lambda o: o.f == "acquire" and o.token == top and o.type == "ok")
    by = (f" (to {who(who_top.process)}, at {secs(who_top.completed)})"
          if who_top is not None else "")
    return (f"{who(blocked.process)} was granted token {blocked.token} at "
            f"{secs(blocked.completed)}, but token {top} had already been granted{by}: "
            "fencing tokens must increase with every grant")


# ---------------------------------------------------------------------------------------------
# register and cas-register


def register_step(state: State, f: str, value: Any, completion: dict[str, Any]) -> State | None:
    """State ``(value,)``, initially ``(None,)``. A read must return the current value."""
    current = state[0]
    if f == "write":
        return (freeze(value),)
    if f == "read":
        if completion.get("type") != "ok":
            return state
        return state if freeze(completion.get("value")) == current else None
    return None


def cas_register_step(state: State, f: str, value: Any,
                      completion: dict[str, Any]) -> State | None:
    """A register with compare-and-set: ``cas`` value ``[old, new]`` succeeds iff current == old."""
    if f != "cas":
        return register_step(state, f, value, completion)
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    old, new = value
    return (freeze(new),) if state[0] == freeze(old) else None


def register_describe(state: State) -> str:
    return f"the register holds {_show(state[0])}"


def _show(value: Any) -> str:
    return "nil" if value is None else show(value)


def register_explain(state: State, blocked: OpView, prefix: Sequence[OpView],
                     part: Sequence[OpView]) -> str:
    writer = _last(prefix, lambda o: o.f in ("write", "cas"))
    source = ("its initial value" if writer is None else
              f"the value {'written' if writer.f == 'write' else 'set'} by {who(writer.process)}"
              f" (invoked at {secs(writer.invoked)})")
    current = _show(state[0])
    when = f"at {secs(blocked.completed)} (invoked at {secs(blocked.invoked)})"
    if blocked.f == "read":
        return (f"{who(blocked.process)} read {_show(freeze(blocked.output))} {when}, but the "
                f"register held {current}, {source}, and no other order of the concurrent "
                "ops explains the read")
    if blocked.f == "cas":
        if not isinstance(blocked.value, list | tuple) or len(blocked.value) != 2:
            return (f"{who(blocked.process)}'s compare-and-set {when} has the value "
                    f"{blocked.value!r}, not [old, new]")
        old = blocked.value[0]
        return (f"{who(blocked.process)}'s compare-and-set from {_show(freeze(old))} "
                f"succeeded {when}, but the register held {current}, {source}")
    return f"{who(blocked.process)}'s {blocked.f} {when} is not allowed: {register_describe(state)}"


MODELS: dict[str, Model] = {
    "mutex": Model(
        name="mutex",
        doc="A lock: acquire only when free, release only by the holder.",
        init=(None,),
        fs=frozenset({"acquire", "release", "extend"}),
        step=mutex_step,
        describe=mutex_describe,
        explain=mutex_explain,
        stuck=lock_stuck,
        understood_failure=refused_not_held,
    ),
    "fenced-mutex": Model(
        name="fenced-mutex",
        doc="A mutex whose every grant carries a fencing token greater than all earlier ones.",
        init=(None, None),
        fs=frozenset({"acquire", "release", "extend"}),
        step=fenced_step,
        describe=mutex_describe,
        explain=mutex_explain,
        stuck=lock_stuck,
        understood_failure=refused_not_held,
    ),
    "register": Model(
        name="register",
        doc="A read/write register, initially nil.",
        init=(None,),
        fs=frozenset({"read", "write"}),
        step=register_step,
        describe=register_describe,
        explain=register_explain,
        process_blind=True,
    ),
    "cas-register": Model(
        name="cas-register",
        doc="A read/write register with compare-and-set ([old, new]), initially nil.",
        init=(None,),
        fs=frozenset({"read", "write", "cas"}),
        step=cas_register_step,
        describe=register_describe,
        explain=register_explain,
        process_blind=True,
    ),
}


def get_model(model: str | Model) -> Model:
    """A model by name (or the model itself). Raises KeyError naming the known models."""
    if isinstance(model, Model):
        return model
    try:
        return MODELS[model]
    except KeyError:
        raise KeyError(f"unknown model {model!r}; known: {', '.join(sorted(MODELS))}") from None


LOCK_FS = frozenset({"acquire", "release", "extend"})


def infer(fs: set[str], tokens: bool = False) -> str | None:
    """The model a history's ops call for (``fs``: the functions of its client ops): a lock
    (``fenced-mutex`` when grants carry tokens), a cas-register, a register; None when no
    model has any of them."""
    if fs & LOCK_FS:
        return "fenced-mutex" if tokens else "mutex"
    if "cas" in fs:
        return "cas-register"
    if fs & {"read", "write"}:
        return "register"
    return None
