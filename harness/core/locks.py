"""The client-side Lock protocol every implementation (ours, a library's, a user's) follows.

A lock is built once per client process with ``Lock(config)``, where ``config`` is a
:class:`LockConfig` naming the DB nodes and options, and then used by one workload thread:

    grant = lock.acquire(timeout)   # -> Grant, or None when it certainly did not acquire
    lock.release(grant)             # -> True released, False it no longer held the lock

Either may raise :class:`Indeterminate` when it cannot know what happened (a timeout, a
connection cut mid-request): the workload records that op as ``info``, never ``fail``.
Either may raise :class:`Refused` for a None or a False that says why (kept in the history).

A lock class declares itself with class attributes (all optional but ``name`` for a registered
lock): ``name``, ``summary``, ``dbs`` (the ``--db`` names it runs on; empty: any), ``tokens``
(do its grants carry fencing tokens?), ``workload_defaults`` (how it is used: hold and
acquire-timeout seconds), ``reentrant``, ``crash_steps``, ``options`` (name ->
:class:`harness.core.options.Option`: what ``--lock-opt`` may set; the values arrive in
``config.options``) and ``timeout_errors`` (exceptions its ``acquire`` raises when it certainly
did not acquire: recorded as ``fail``; anything else it raises is ``info``), ``release_waits``
(False: its release sends and does not wait for a reply), ``release_frees_others`` (True: its
release can remove another client's hold, a bare ``DEL`` or a ``GET`` then ``DEL``; False, the
default: it removes only the caller's own key, node or row). Optional methods:
``held(grant)`` (a lock that can tell it was lost), ``session(grant)``, ``release_bound()``
(the seconds its release takes at most on its own, or None: within ``release_timeout``, the
release is called on the workload's thread, with no thread of its own), ``setup()`` and
``close()``.

``setup()``: what the lock needs once before it is used (a table, a schema), called once in
its client process after the lock is built and before the first op, on the thread that then
calls ``acquire``: before any fault, since faults wait for every client's first op. It is
bounded (30 s, :mod:`workloads.lock_setup`): a setup that raises or does not return stops the
client with one line in its log, and the run ends could-not-run (exit 3), never with a verdict.

The registry checks these declarations when it loads the class, before any server starts:
``options`` values are :class:`~harness.core.options.Option` with a default of the declared
type (or None), ``workload_defaults`` keys are among :data:`WORKLOAD_KEYS`, ``timeout_errors``
are exception classes; anything else is one line naming the class and the field, exit 64.
``timeout_errors`` apply to ``release`` too (it certainly did not release: ``fail``), and a
release that takes longer than ``release_timeout`` seconds is recorded ``info`` while the
client goes on to its next session. The harness's own settings (the seed, the client's source
address, ...) arrive apart from the options, in ``config.harness``; those that earlier
releases put in ``config.options`` (:data:`MOVED_TO_HARNESS`) are still answered there for
this release, from ``config.harness``, with a one-line deprecation warning (at load for a read
the registry sees in the class, and in the client's log the first time one is read).

A lock whose ``acquire`` and ``release`` (and ``held``, ``close``) are coroutines is run on an
event loop of its client process's own, on a thread that keeps running between calls, so its
background tasks (a renewal loop) live as they would in an application; its optional
``setup`` is ``async def`` too, awaited there once before the first acquire, with the same
bound (the registry refuses a ``setup`` that is a coroutine function on a sync lock, or not
one on an async lock).

``session(grant)``: a lock that lives in a database transaction (``SELECT ... FOR UPDATE``)
returns the session the critical section must write through, so that the writes commit or
abort with the lock. The workload hands it to the protected resource (``via``), which must then
be a resource that takes sessions (:mod:`harness.core.resource`) in the lock's own database:
the controller puts it there. Locks without it write as before, on the resource's own
connection. A lock that declares ``resource_in_lock_db = True`` has the resource in its own
database as well (when it is of that database's kind), written on the resource's connection.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar, runtime_checkable

from harness.core import defaults
from harness.core.cluster import Node

Endpoint = Node  # what a lock is told about each DB node: name, host, port
T = TypeVar("T")


class Grant(NamedTuple):
    """What a successful acquire returns.

    ``token``: the fencing token, when the implementation has one (it must increase with grant
    order). ``validity``: the seconds the implementation promises the lock is ours, if it
    promises any. ``handle``: whatever the implementation needs to release it.

    Immutable, compared and hashed by its fields, as a frozen dataclass, and built by keyword
    or position the same way; a named tuple because it is built once a session on the hot path
    of every lock: 1.5k instructions (``tuple.__new__(Grant, (token, validity, handle))``, as
    the project's own Redis recipe builds it) where the frozen dataclass took 4.9k.
    """

    token: int | None = None
    validity: float | None = None
    handle: Any = None


@dataclass(frozen=True)
class LockConfig:
    """What a lock implementation is told: where the DB nodes are and how to behave.

    ``options``: the lock's own declared options (``--lock-opt``), every one of them present,
    its default (None included) where the run gave none. ``harness``: what the harness tells
    every lock, in a namespace of its own so that no option of a lock can hide it: ``seed``
    (the run's), ``source`` (the client's own address, to bind its connections to),
    ``workload_needs_tokens``, and what the DB or the lock's entry adds (a Sentinel DB's
    ``sentinels`` and ``service``, an ``exec:PATH`` lock's ``program``)."""

    nodes: tuple[Node, ...]
    name: str = "lock"
    ttl: float = defaults.TTL
    op_timeout: float = defaults.OP_TIMEOUT
    process: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    harness: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.options, LockOptions):
            object.__setattr__(self, "options", LockOptions(self.options, self.harness))


# What config.harness carries that the releases before it put in config.options: read from
# config.options (and not declared as an option of the lock's own), each is answered from
# config.harness for this release, with a one-line warning; the next release drops them.
MOVED_TO_HARNESS = frozenset({"seed", "source", "workload_needs_tokens", "sentinels",
                              "service", "program"})
_WARNED: set[str] = set()  # the moved keys this process has warned of


def moved_warning(key: str) -> str:
    return (f"config.options[{key!r}] is deprecated: it moved to config.harness[{key!r}] "
            "(answered from there for this release only: read it there)")


class LockOptions(dict[str, Any]):
    """``config.options``: the lock's declared options, a dict; a key of
    :data:`MOVED_TO_HARNESS` that is not one of them is answered from ``config.harness``
    (``[key]``, ``get``, ``in``), with a warning on stderr (the client's log) the first time,
    instead of a KeyError in every client."""

    def __init__(self, options: dict[str, Any], harness: dict[str, Any]) -> None:
        super().__init__(options)
        self.harness = harness

    def _moved(self, key: object) -> bool:
        """Is ``key`` (not an option) one that moved to config.harness, and there? Warned."""
        if key not in MOVED_TO_HARNESS or key not in self.harness:
            return False
        if key not in _WARNED:
            _WARNED.add(str(key))
            print(f"lock-harness: {moved_warning(str(key))}", file=sys.stderr, flush=True)
        return True

    def __missing__(self, key: str) -> Any:
        if not self._moved(key):
            raise KeyError(key)
        return self.harness[key]

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._moved(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


# What a lock's ``workload_defaults`` may set (seconds, each at most an hour): how long a
# holder works, a client thinks between sessions and waits for an acquire; how long a release
# may take before it is recorded ``info`` and the client goes on (``release_timeout``); and
# how often ``held(grant)`` is asked while the holder works (``held_poll``).
WORKLOAD_KEYS = ("hold_min", "hold_max", "think_min", "think_max", "acquire_timeout",
                 "release_timeout", "held_poll")

# Consensus locks guard long critical sections (a leader's term, a batch job): holds that span
# a session timeout or lease TTL, so that "it expired while its holder worked on" can happen.
LONG_CRITICAL_SECTIONS: dict[str, float] = {"hold_min": 1.0, "hold_max": 6.0,
                                            "acquire_timeout": 15.0}


class Indeterminate(Exception):
    """The operation may or may not have taken effect (timeout, connection lost mid-request)."""


class Refused(Exception):
    """The lock certainly did not do it, and says why: raised by ``acquire`` it is a None
    (``fail``, certainly not acquired), by ``release`` a False (``fail``, ``not-held``: the
    lock was no longer ours). Its message is kept in the history's ``error``."""


class LockContractError(Exception):
    """A lock broke the Lock protocol (``acquire`` returned neither a Grant nor None, say):
    the harness cannot test it, so the client stops and the run says why (exit 3)."""


@runtime_checkable
class Lock(Protocol):
    def acquire(self, timeout: float) -> Grant | None: ...

    def release(self, grant: Grant) -> bool: ...


class LockRole:
    """Optional base class: the declarations a lock may make, with their defaults."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    dbs: ClassVar[tuple[str, ...]] = ()
    tokens: ClassVar[bool] = False
    workload_defaults: ClassVar[dict[str, float]] = {}
    reentrant: ClassVar[bool] = False
    crash_steps: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[dict[str, Any]] = {}
    timeout_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    # Does release wait for the server's reply? False for one that sends and closes: its
    # releases then prove nothing about the network (the faults checker does not count them).
    release_waits: ClassVar[bool] = True
    # Can release remove another client's hold (it does not check the owner)? Only then may
    # the report say an overlap was let in by another client's release.
    release_frees_others: ClassVar[bool] = False

    def close(self) -> None:
        return None


def retried(attempt: Callable[[], T | None], timeout: float, pause: Callable[[], float],
            missed: tuple[type[BaseException], ...] = ()) -> T | None:
    """The loop of an ``acquire`` that polls: ``attempt()`` until it gives something (then
    that) or ``timeout`` seconds have passed (then None), ``pause()`` seconds between tries.
    An attempt that raises one of ``missed`` certainly did nothing: the next try follows."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = attempt()
        except missed:
            got = None
        if got is not None:
            return got
        if time.monotonic() >= deadline:
            return None
        time.sleep(pause())
