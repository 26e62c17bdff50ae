"""The Nemesis role: a base class with the defaults, and how targets are chosen.

A nemesis picks its targets (``select``), then injects (``start``) and heals (``stop``) its
fault; ``teardown`` heals everything it could have done, whatever state it is in. It drives
nodes only through ``ctx.cluster`` (:class:`harness.core.cluster.NodeOps`) and clients only
through ``ctx.clients``, so it never knows which backend it runs on.

Targets are roles, resolved when the fault starts (so a replayed schedule hits "the holder",
whoever that is then): for client faults ``holder`` (the client holding the lock now),
``waiter`` (one blocked in an acquire), ``any`` or ``client:3``; for node faults ``any``,
``leader``, ``follower`` (a node that does not lead now), ``minority``, ``majority``, ``all``
or ``node:n2``.

A nemesis also words its own faults for the report (``describe``), and a family of faults names
its aliases (``aliases``: an old name and the class attributes it presets; the registry loads
``partition-halves`` as the ``partition`` family with shape ``halves``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from harness.core.capabilities import HasLeader
from harness.core.cluster import NemesisContext, client_name
from harness.core.fault_run import FaultRun, generic_words
from harness.core.options import Option
from nemesis import topology

HOLDER_WAIT = 3.0  # seconds to wait for somebody to hold (or wait for) the lock
RETARGETS = 5  # strikes made anew when the target had left the state the fault was aimed at
CLIENT_TARGETS = ("holder", "waiter", "any", "client:N")
NODE_TARGETS = ("any", "leader", "minority", "majority", "all", "node:NAME")


class TargetError(ValueError):
    """A target role this nemesis cannot aim at (a usage error, said before the run starts)."""


class BaseNemesis:
    """Defaults: no setup, faults last a little longer than the lock's TTL."""

    name: ClassVar[str] = "base"
    summary: ClassVar[str] = ""
    requires: ClassVar[tuple[type, ...]] = ()
    targets: ClassVar[tuple[str, ...]] = ()
    default_target: ClassVar[str | None] = None
    options: ClassVar[dict[str, Option]] = {}
    # True for faults that cut clients' links: they bite only if each client connects from
    # its own address, which the run checks before the first fault (or refuses them).
    cuts_clients: ClassVar[bool] = False
    # DB nodes it needs to find a target at all (a partition among the nodes needs two): on a
    # smaller cluster every step of it is skipped, so harness explore leaves it out.
    min_nodes: ClassVar[int] = 1
    # Other names of this class, each with the class attributes it presets (a family's member:
    # ``{"clock-back": {"preset": "back", "summary": ...}}``); see :meth:`alias`.
    aliases: ClassVar[dict[str, dict[str, Any]]] = {}
    colour: ClassVar[str | None] = None  # its bars on the report's timeline (None: grey)
    _detail: dict[str, Any] | None = None  # what detail() gives, set by start and stop

    @classmethod
    def alias(cls, name: str) -> type[BaseNemesis]:
        """The class ``name`` stands for: this one under that name, with what it presets."""
        if name == cls.name:
            return cls
        if name not in cls.aliases:
            raise KeyError(f"{cls.name} has no alias {name!r} ({', '.join(cls.aliases)})")
        attrs = {"name": name, "aliases": {}, "__doc__": cls.__doc__, **cls.aliases[name]}
        return type(cls.__name__, (cls,), attrs)

    @classmethod
    def pattern(cls, params: dict[str, Any]) -> str | None:
        """Which of its patterns a fault with these parameters is (None: it has none)."""
        return None

    @classmethod
    def used(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Of a fault's parameters, those it used: an option declared for other patterns than
        its own (a jump's clock-rate) left out."""
        pattern = cls.pattern(params)
        return {k: v for k, v in params.items()
                if pattern in (getattr(cls.options.get(k), "patterns", ()) or (pattern,))}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        """The fault that ran, in the report's words (``a pause (SIGSTOP) of c0 (the holder)
        at 1.2 s for 4.2 s``); by default ``NAME on TARGETS at ...``."""
        return generic_words(run)

    @classmethod
    def preset_conflict(cls, option: str, preset: str | None, asked: Any,
                        family: str) -> str | None:
        """Why an alias that presets ``option`` refuses another value for it (None: it
        does not)."""
        if preset is None or asked in (None, preset):
            return None
        return (f"{cls.name} is {option} {preset}, not {asked} (use --nemesis {family} "
                f"--nemesis-opt {option}={asked})")

    def setup(self, ctx: NemesisContext) -> None:
        return None

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        raise NotImplementedError

    def duration(self, ctx: NemesisContext) -> float:
        return ctx.ttl + 2.0

    def teardown(self, ctx: NemesisContext) -> None:
        return None

    def detail(self) -> dict[str, Any] | None:
        """Extra facts about the fault just started or stopped, recorded in the history: by
        default ``_detail``, which the fault sets."""
        return self._detail

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        """What the history must show while this fault is on, if it bit (recorded with the
        start; the ``faults`` checker holds the history to it): ``{"frozen": [3]}`` (client 3
        records nothing), ``{"cut-off": [3]}`` (client 3 completes no lock op),
        ``{"completes": [3]}`` (client 3's lock ops are meant to complete under it: a window
        in which none did tested unavailability only)."""
        return None

    @classmethod
    def check_target(cls, target: str | None) -> None:
        """Raise TargetError if this nemesis cannot aim at ``target``."""
        if target is None:
            return
        kind = target.split(":", 1)[0] + (":N" if target.startswith("client:") else
                                          ":NAME" if target.startswith("node:") else "")
        if kind not in cls.targets:
            accepted = ", ".join(cls.targets) or "no target roles"
            raise TargetError(f"nemesis {cls.name} cannot target {target!r}: it takes "
                              f"{accepted}")


def wait_for(ctx: NemesisContext, pick: Any, timeout: float = HOLDER_WAIT,
             at_end: bool = False) -> int | None:
    """The first process ``pick`` names within ``timeout``; the run's end stops the wait unless
    ``at_end`` (a heal at the end that must meet a hold: the clients run until it is done)."""
    deadline = time.monotonic() + timeout
    while True:
        found = pick()
        if found:
            return int(found[0])
        if time.monotonic() >= deadline or (ctx.finishing.is_set() and not at_end):
            return None
        time.sleep(0.01)


def wait_for_holder(ctx: NemesisContext, timeout: float = HOLDER_WAIT) -> int | None:
    """The client that holds the lock now. Of several that believe they hold it (a holder
    frozen past its lease still believes so, beside the client the service granted the lock
    to next), the newest grant's: the lease the service keeps. The oldest was a stale holder:
    a second pause froze again the client the first had just woken, before it could make the
    late write a fenced resource must refuse (CI: stale-rejected 0 in 2 of 4 runs)."""
    return wait_for(ctx, lambda: ctx.live.holders()[::-1], timeout)


Aim = tuple[int, float | None]  # (holder, since when): the hold a fault was aimed at


def current_hold(ctx: NemesisContext) -> Aim | None:
    """The newest hold in progress (see :func:`wait_for_holder`), from one read of the
    journals, None if nobody holds."""
    holds = ctx.live.holds()
    if not holds:
        return None
    p = max(holds, key=holds.__getitem__)
    return p, holds[p]


def wait_for_fresh_hold(ctx: NemesisContext, timeout: float = 2 * HOLDER_WAIT,
                        at_end: bool = False, young: float = 0.0) -> Aim | None:
    """A hold that began after this call, as soon as there is one: a fault struck then meets
    the whole of that hold, not whatever was left of one half done. Each look is one read of
    who holds since when: asking who holds, then since when, could see a hold end in between
    and take the holder that just let go for a new one (seen: a heal aimed so landed 4 ms after
    the hold it was aimed at ended). ``young``: a hold that began at most that many seconds
    before this call counts as fresh too (it has all but that of its hold ahead)."""
    before = ctx.live.holds()
    now = ctx.live.now() if young > 0 else None
    if now is not None:
        before = {p: since for p, since in before.items() if now - since > young}
    deadline = time.monotonic() + timeout
    while True:
        fresh = [(since, p) for p, since in ctx.live.holds().items() if before.get(p) != since]
        if fresh:
            since, p = min(fresh)
            return p, since
        if time.monotonic() >= deadline or (ctx.finishing.is_set() and not at_end):
            return None
        time.sleep(0.01)


def wait_for_fresh_grant(ctx: NemesisContext, timeout: float = 2 * HOLDER_WAIT,
                         at_end: bool = False, young: float = 0.0) -> int | None:
    """The client of :func:`wait_for_fresh_hold`."""
    hold = wait_for_fresh_hold(ctx, timeout, at_end, young)
    return None if hold is None else hold[0]


def aim_at(ctx: NemesisContext, fresh: bool = False, at_end: bool = False) -> Aim | None:
    """The hold a fault that needs its holder to go on holding after it lands (a cut, a clock
    move) is aimed at, None if nobody holds. ``fresh``: a hold that begins now, else (none in
    :data:`HOLDER_WAIT`) the one in progress, for a fault that cannot be made again if it
    misses (see :mod:`nemesis.clock`); ``at_end``: see :func:`wait_for`."""
    if fresh:
        hold = wait_for_fresh_hold(ctx, HOLDER_WAIT, at_end)
        if hold is not None or (ctx.finishing.is_set() and not at_end):
            return hold
        return current_hold(ctx)
    return None if wait_for_holder(ctx) is None else current_hold(ctx)


def aim_at_awaited(ctx: NemesisContext, timeout: float | None = None) -> Aim | None:
    """A fresh hold (one that begins after this call) while another client is blocked in an
    acquire (a waiter asking for the lock): a fault that ends a lease early (a clock jump)
    then meets a client ready to take it and the whole hold for it to ask in, not a hold its
    holder lets go before anybody asks again (``clock@redis`` in CI: the holder's release
    refused, its lease gone, no acquire in between). None within ``timeout`` (default
    :data:`HOLDER_WAIT`): the hold :func:`aim_at` finds."""
    before = ctx.live.holds()
    found: list[Aim] = []

    def pick() -> list[int]:
        holds, waiting = ctx.live.holds(), ctx.live.waiters()
        fresh = [(since, p) for p, since in holds.items() if before.get(p) != since]
        if not fresh or all(w in holds for w in waiting):
            return []
        since, p = max(fresh)
        found.append((p, since))
        return [p]

    waited = wait_for(ctx, pick, HOLDER_WAIT if timeout is None else timeout)
    return found[-1] if waited is not None else aim_at(ctx)


def hit(ctx: NemesisContext, aimed: Aim) -> bool:
    """Is the hold a fault was aimed at still on, so that the fault landed inside it?"""
    p, since = aimed
    return since is not None and ctx.live.held_since(p) == since


def strike(fault: Callable[[], None], landed: Callable[[], bool],
           again: Callable[[], bool]) -> None:
    """The aim of a fault at a target in a state (the hold it was aimed at, between writes,
    waiting), which it can leave in the ms the fault takes to land (CI: a pause meant for the
    holder froze a client that had just released): if not ``landed``, ``again`` says the miss
    and re-picks (True: strike anew; False: what was struck stays), :data:`RETARGETS` times."""
    for attempt in range(RETARGETS + 1):
        fault()
        if attempt == RETARGETS or landed() or not again():
            return


def client_target(ctx: NemesisContext, target: str | None, default: str = "holder"
                  ) -> list[str] | None:
    """The client endpoint a client fault hits now, or None when there is none."""
    role = target or default
    if role == "holder":
        p = wait_for_holder(ctx)
    elif role == "waiter":
        p = wait_for(ctx, ctx.live.waiters)
    elif role == "any":
        alive = [c for c in ctx.clients.alive() if c not in ctx.clients.doomed]
        p = ctx.rng.choice(alive) if alive else None
    elif role.startswith("client:"):
        p = int(role.split(":", 1)[1])
        if p not in ctx.clients.processes:
            raise TargetError(f"no client {p} (clients: {ctx.clients.processes})")
    else:
        raise TargetError(f"{role!r} is not a client target ({', '.join(CLIENT_TARGETS)})")
    return None if p is None else [client_name(p)]


def node_target(ctx: NemesisContext, target: str | None, default: str = "any"
                ) -> list[str] | None:
    """The DB nodes a node fault hits now, or None when there are none right now."""
    role = target or default
    names = [n.name for n in ctx.nodes]
    if role == "any":
        return [ctx.rng.choice(names)]
    if role == "all":
        return names
    if role == "minority" and len(names) < 2:
        return None  # one node has no minority
    if role in ("majority", "minority"):
        return topology.side(topology.of(ctx), role, ctx.rng)
    if role in ("leader", "follower"):
        if not isinstance(ctx.db, HasLeader):
            raise TargetError(f"{getattr(ctx.db, 'name', 'this db')} has no leader to target")
        leader = ctx.db.leader(ctx.nodes)
        followers = [x for x in names if x != leader]
        if leader is None or role == "leader":
            return None if leader is None else [leader]
        return [ctx.rng.choice(followers)] if followers else None
    if role.startswith("node:"):
        wanted = [x for x in role.split(":", 1)[1].split(",") if x]
        unknown = [w for w in wanted if w not in names]
        if unknown or not wanted:
            raise TargetError(f"no DB node {(unknown or [''])[0]!r} (nodes: {', '.join(names)})")
        return wanted
    raise TargetError(f"{role!r} is not a node target ({', '.join(NODE_TARGETS)})")
