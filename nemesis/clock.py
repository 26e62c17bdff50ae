"""Clock faults, one family whose members are data: which clock, what pattern, which nodes.

Every clock fault waits until somebody holds the lock (that is when a clock matters to a lease),
then moves the clocks of a set of DB nodes. Its data:

- ``clock-id``: ``wall`` (default: the realtime clock, Redis ``TIME`` and key expiry),
  ``monotonic``, or ``both`` (one offset for both clocks). A DB lists the ids it can move
  (``clocks``); libfaketime moves the wall clock alone or both, never the monotonic clock
  alone: ZooKeeper's is moved alone by libfaketime moving both and the vDSO patch setting the
  wall clock back, read back from its ``nanoTime`` (``lresp``); Redis and PostgreSQL refuse
  ``monotonic`` before start (exit 64). The id is one for the run: a server under
  libfaketime is started faking what its faults move.
- ``clock-pattern``:

  - ``jump``: a jump by ``clock-offset`` seconds (default +60): a lease stored there expires
    at once although its holder is still working (Kleppmann's Redlock scenario when the set is
    a majority); healed by a jump back, except a monotonic clock, which is never set back (it
    runs on from the jump; ``back``, ``strobe`` and negative offsets are refused for it);
  - ``back``: a jump back (default -60 s): leases there live that much longer;
  - ``strobe``: the clocks flip between the offset and the true time every ``clock-period``
    seconds (default 0.2) for as long as the fault lasts;
  - ``rate``: the clocks run at ``clock-rate`` times real time (default 2) for as long as the
    fault lasts, with no jump at its start or its end: the offset grows by ``(rate - 1)`` s per
    second, moved in steps of :data:`RATE_STEP` s, and stays where it got to when the fault
    ends (the clock is that far ahead; the run's end puts it back). A rate below 1 on the
    monotonic clock is refused: a step down would set it back.

- the node set: the step's target role when it has one (``clock:all``, ``clock:node=n2``, a
  schedule step's ``target``; any node role: ``any``, ``minority``, ``majority``, ``all``,
  ``leader``, ``node:NAME``), else option ``clock-nodes``: ``majority`` (default; the only
  node of a single Redis), ``minority``, ``one``, ``all``, or names (``n1,n3``).

The old names stay: ``clock`` is the family (``clock-pattern`` jump unless told), and its
aliases ``clock-back`` and ``clock-strobe`` preset the pattern ``back`` and ``strobe``.

Each change is verified by reading the node's own clock back (Redis ``TIME``) and the observed
offsets are recorded in the history; a node whose clock did not move fails the fault (it is
never counted as one that bit); healing puts the clocks back and verifies that too. A rate's
steps, every 0.05 s, are read back every 0.25 s on a thread of their own (a read may be slow:
a ZooKeeper session); the history gets the observed rate of each node (the read-backs' slope).

A jump aims at a hold: the holder seen when the fault starts must still hold once the move is
verified, else the move may have landed after it let go and hit nobody's lease (seen over SSH,
where a move takes ~20 ms). Such a miss moves the clocks once more by the same offset, for the
hold in progress then, up to :data:`RETARGETS` times: the offsets add up (+60, +120, ...), and
the misses are in the fault's detail. Healing a jump back is itself a jump ahead, and cannot be
made again: it waits for a hold to begin (at most :data:`nemesis.base.HOLDER_WAIT`, then the
hold in progress), so that it meets a whole hold (CI: a heal made at once expired a lease 22 ms
before its holder let go, and no waiter asked in between); a miss is noted.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from harness.core.capabilities import CLOCK_IDS, ClockFaults, clock_mechanism, clock_unmet
from harness.core.cluster import NemesisContext
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis import topology
from nemesis.base import (
    NODE_TARGETS,
    RETARGETS,  # noqa: F401 (the bound of its aim, nemesis.base.strike: read here)
    Aim,
    BaseNemesis,
    aim_at,
    aim_at_awaited,
    hit,
    node_target,
    strike,
)

TOLERANCE = 1.0  # seconds between the offset asked for and the one observed
PATTERNS = ("jump", "back", "strobe", "rate")
DEFAULT_OFFSET = {"jump": 60.0, "back": -60.0, "strobe": 60.0}
RATE_STEP = 0.05  # seconds between two steps of a rate's offset
READ_PERIOD = 0.25  # seconds between two read-backs of each node while a rate runs


def choose_nodes(ctx: NemesisContext, how: Any) -> list[str]:
    """The node names a clock fault hits, from option ``clock-nodes``."""
    names = [n.name for n in ctx.nodes]
    if isinstance(how, list | tuple):
        chosen = [str(x) for x in how]
    elif isinstance(how, str) and how not in topology.SIDES:
        chosen = [x.strip() for x in how.replace("+", ",").split(",") if x.strip()]
    else:
        chosen = topology.side(topology.of(ctx), str(how), ctx.rng)
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise RuntimeError(f"clock-nodes names {unknown[0]!r}, not one of {', '.join(names)}")
    return sorted(chosen)


class Clock(BaseNemesis):
    """The clock family: ``clock-id``, ``clock-pattern`` and the node set are data."""

    name = "clock"
    summary = ("move the clock of a majority of DB nodes (clock-id wall|monotonic|both; "
               "clock-pattern jump +60 s|back|strobe|rate), verified")
    requires = (ClockFaults,)
    targets = NODE_TARGETS
    default_target = "majority"  # what option clock-nodes chooses by default
    preset: ClassVar[str | None] = None  # the pattern an alias's name fixes
    colour = "#8250df"
    aliases = {
        "clock-back": {"preset": "back", "summary": "jump the clock of a majority of DB nodes "
                       "back 60 s (clock-pattern back), verified"},
        "clock-strobe": {"preset": "strobe", "summary": "strobe the clock of a majority of DB "
                         "nodes between +60 s and true time every 0.2 s (clock-pattern "
                         "strobe), verified"},
    }
    options = {
        "clock-offset": Option(float, None, "seconds to move the clocks (default +60, "
                               "clock-back -60)", minimum=-86400 * 365, maximum=86400 * 365,
                               patterns=("jump", "back", "strobe")),
        "clock-nodes": Option(str, "majority", "majority, minority, one, all, or node names "
                              "(n1,n3)"),
        "clock-id": Option(str, "wall", "the clock moved: wall, monotonic or both (wall and "
                           "monotonic by one offset)", choices=CLOCK_IDS),
        "clock-pattern": Option(str, None, "jump (default), back, strobe, or rate",
                                choices=PATTERNS),
        "clock-rate": Option(float, 2.0, "clock-pattern rate: how many seconds the clocks "
                             "count per real second", minimum=0.01, maximum=100,
                             patterns=("rate",)),
        "clock-period": Option(float, 0.2, "clock-pattern strobe: seconds between two flips",
                               minimum=0.01, maximum=60, patterns=("strobe",)),
    }

    def __init__(self, offset: float | None = None) -> None:
        self._offset = offset
        self._aim: Aim | None = None  # (holder, since when) at select
        self._base: dict[str, float] = {}  # node -> where a rate left its clock
        self._thread: threading.Thread | None = None
        self._reader: threading.Thread | None = None  # a rate's read-backs
        self._halt = threading.Event()
        self._seen: dict[str, list[tuple[float, float]]] = {}  # node -> (when, observed)
        self._moves = 0
        self._errors: list[str] = []
        self._t0 = 0.0
        self._asked: dict[str, float] = {}  # node -> the offset of the last move (absolute)
        self._mono_base: dict[str, float] = {}  # node -> its monotonic clock before faults

    @classmethod
    def clock_id(cls, options: dict[str, Any]) -> str:
        """The clock this run's clock faults move (one option for the run: a server under
        libfaketime is started faking what its faults move)."""
        return str(options.get("clock-id") or "wall")

    @classmethod
    def pattern(cls, options: dict[str, Any]) -> str:
        return cls.preset or str(options.get("clock-pattern") or "jump")

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        conflict = cls.preset_conflict("clock-pattern", cls.preset,
                                       options.get("clock-pattern"), "clock")
        if conflict:
            return conflict
        pattern = cls.pattern(options)
        clock = cls.clock_id(options)
        if "clock-rate" in options and pattern != "rate":
            return f"clock-rate is for clock-pattern rate, not {pattern}"
        if pattern == "rate" and clock != "wall" and float(options.get("clock-rate", 2)) < 1:
            return ("a rate below 1 on the monotonic clock is moved in steps back: it would set "
                    "that clock back; use clock-id wall")
        if clock != "wall" and (pattern in ("back", "strobe") or float(
                options.get("clock-offset") or 0) < 0):
            return (f"clock-pattern {pattern} with a negative offset or a flip back sets the "
                    "monotonic clock back, which no clock does; use clock-id wall")
        return clock_unmet(db, clock)

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        """``a +60 s clock jump on n1,n2 ...``, ``a clock rate x2 on ...``, ``a clock strobe
        (+60 s every 0.2 s) on ...``."""
        detail = run.detail or {}
        pattern = cls.preset or detail.get("pattern")
        offset = detail.get("offset")
        size = f"{offset:+g} s " if isinstance(offset, int | float) else ""
        if pattern == "rate":
            rate = detail.get("rate")
            x = f" x{rate:g}" if isinstance(rate, int | float) else ""
            return f"a clock rate{x} on {run.who()} {run.when()}{go_stall(detail)}"
        if pattern == "strobe":
            period = detail.get("period")
            every = f" every {period:g} s" if isinstance(period, int | float) else ""
            return f"a clock strobe ({size.strip() or 'offset'}{every}) on {run.who()} {run.when()}"
        return f"a {size}clock jump on {run.who()} {run.when()}{go_stall(detail)}"

    @classmethod
    def label(cls, params: dict[str, Any], detail: Any) -> str:
        """What one window did, in a few words for a report's fault lane: ``+60 s wall jump``,
        ``wall x2``, ``wall strobe +60 s / 0.2 s`` (from its detail, else what it was asked)."""
        d = detail if isinstance(detail, dict) else {}
        pattern = cls.preset or d.get("pattern") or params.get("clock-pattern") or "jump"
        clock = d.get("clock") or params.get("clock-id") or "wall"
        if pattern == "rate":
            rate = d.get("rate", params.get("clock-rate"))
            return f"{clock} x{rate:g}" if isinstance(rate, int | float) else f"{clock} rate"
        offset = d.get("offset", params.get("clock-offset"))
        size = f"{offset:+g} s " if isinstance(offset, int | float) else ""
        if pattern == "strobe":
            period = d.get("period", params.get("clock-period"))
            every = f" / {period:g} s" if isinstance(period, int | float) else ""
            return f"{clock} strobe {size.strip()}{every}".strip()
        return f"{size}{clock} jump"

    @classmethod
    def check_step(cls, options: dict[str, Any], params: dict[str, Any]) -> str | None:
        """A schedule step's params cannot change the clock id: the servers were started
        faking the run's (``--nemesis-opt clock-id``)."""
        if "clock-id" in params and params["clock-id"] != cls.clock_id(options):
            return (f"params clock-id = {params['clock-id']!r}: the clock id is one for the "
                    "run (its servers start faking it); give it with --nemesis-opt clock-id")
        return None

    def offset(self, ctx: NemesisContext) -> float:
        if self._offset is not None:
            return self._offset
        offset = ctx.options.get("clock-offset")
        pattern = self.pattern(ctx.options)
        return float(DEFAULT_OFFSET.get(pattern, 0.0) if offset is None else offset)

    def setup(self, ctx: NemesisContext) -> None:
        choose_nodes(ctx, ctx.options.get("clock-nodes", "majority"))  # bad names: say so now
        self._mono_base = monotonic_offsets(ctx, [n.name for n in ctx.nodes])  # offsets 0

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        self._aim = aim_at_awaited(ctx)  # while a lease is held and a waiter asks: it hurts
        if target is not None:
            return node_target(ctx, target)
        return choose_nodes(ctx, ctx.options.get("clock-nodes", "majority"))

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        pattern = self.pattern(ctx.options)
        if pattern in ("jump", "back"):
            self._jump(ctx, targets)
        else:
            self._run(ctx, targets, pattern)
        assert self._detail is not None
        clock = self.clock_id(ctx.options)
        go = clock != "wall" and clock_mechanism(ctx.db) == "vdso"  # a Go server (etcd)
        self._detail = {"pattern": pattern, "clock": clock, **({"mechanism": "vdso"} if go
                                                                else {}),
                        **self._detail, "asked": dict(self._asked),
                        **monotonic_read_back(ctx, list(self._asked), self._mono_base)}

    def _jump(self, ctx: NemesisContext, targets: list[str]) -> None:
        step, missed, moved = self.offset(ctx), [], {"offset": 0.0}

        def move() -> None:  # by one more step each time (see the module's docstring)
            moved["offset"] += step
            moved["observed"] = self._move(ctx, targets, moved["offset"])

        def again() -> bool:
            missed.append(self._aim[0])  # type: ignore[index]  (it missed: there was one)
            self._aim = aim_at(ctx)
            return self._aim is not None  # none: the next grant is already on the new clock

        strike(move, lambda: self._aim is None or hit(ctx, self._aim), again)
        self._detail = {**moved, **({"missed": missed} if missed else {})}

    def _move(self, ctx: NemesisContext, targets: list[str], offset: float
              ) -> dict[str, float]:
        """Each node ``offset`` from where a rate left it, read back (the observed offsets
        from the true time)."""
        self._asked = {n: round(self._base.get(n, 0.0) + offset, 3) for n in targets}
        return move_each(ctx, dict(self._asked), self._mono_base)

    def _run(self, ctx: NemesisContext, targets: list[str], pattern: str) -> None:
        """A strobe or a rate: a first move now, then steps on a thread until ``stop``."""
        if pattern == "strobe":
            offset = self.offset(ctx)
            period = float(ctx.options.get("clock-period", 0.2))
            self._detail = {"offset": offset, "period": period,
                            "observed": self._move(ctx, targets, offset)}
            step = self._strobe_step(offset)
        else:
            rate = float(ctx.options.get("clock-rate", 2.0))
            period = RATE_STEP
            self._detail = {"rate": rate, "offset": 0.0,
                            "observed": self._move(ctx, targets, 0.0)}
            step = self._rate_step(rate)
        self._t0 = time.monotonic()
        self._seen = {k: [(0.0, v)] for k, v in self._detail["observed"].items()}
        self._moves, self._errors = 1, []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._steps,
                                        args=(ctx, targets, step, period, pattern == "strobe"),
                                        name=f"clock-{pattern}", daemon=True)
        self._thread.start()
        self._reader = None
        if pattern == "rate":  # read back on a thread of its own: a slow read (a ZooKeeper
            # session) would hold the steps back and make them jumps
            self._reader = threading.Thread(target=self._reads, args=(ctx, targets),
                                            name="clock-rate-reads", daemon=True)
            self._reader.start()

    @staticmethod
    def _strobe_step(offset: float) -> Any:
        state = {"on": True}

        def step(elapsed: float) -> float:
            state["on"] = not state["on"]
            return offset if state["on"] else 0.0
        return step

    @staticmethod
    def _rate_step(rate: float) -> Any:
        return lambda elapsed: (rate - 1.0) * elapsed

    def _steps(self, ctx: NemesisContext, targets: list[str], step: Any,
               period: float, verify_each: bool) -> None:
        """Move the clocks every ``period`` s; a strobe verifies each flip, a rate's steps are
        read back by :meth:`_reads`."""
        clock = self.clock_id(ctx.options)
        while not self._halt.wait(period):
            try:
                elapsed = time.monotonic() - self._t0
                if verify_each:
                    for name, seen in self._move(ctx, targets, step(elapsed)).items():
                        self._seen.setdefault(name, []).append((elapsed, seen))
                else:
                    offset = step(elapsed)
                    for name in targets:
                        asked = round(self._base.get(name, 0.0) + offset, 3)
                        ctx.cluster.set_clock(ctx.node(name), asked, clock)
                        self._asked[name] = asked
                self._moves += 1
            except Exception as e:  # recorded at stop; the final heal still runs
                self._errors.append(str(e))
                return

    def _reads(self, ctx: NemesisContext, targets: list[str]) -> None:
        """Read each node's clock back every :data:`READ_PERIOD` s while a rate runs: it must
        show an offset the steps asked for while it was read (within TOLERANCE)."""
        while not self._halt.wait(READ_PERIOD):
            for name in targets:
                try:
                    before = self._asked.get(name, 0.0)
                    seen = observed_offset(ctx, name, self._mono_base)
                    low, high = sorted((before, self._asked.get(name, 0.0)))  # rate < 1: down
                except Exception as e:
                    self._errors.append(f"{name}: {e}")
                    return
                elapsed = time.monotonic() - self._t0
                if not low - TOLERANCE <= seen <= high + TOLERANCE:
                    self._errors.append(f"{name}: clock offset is {seen:+.2f} s, not "
                                        f"{low:+.2f} to {high:+.2f} s: the clock fault does "
                                        "not reach this server")
                    return
                self._seen.setdefault(name, []).append((elapsed, round(seen, 3)))

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        pattern = self.pattern(ctx.options)
        try:
            self._stop(ctx, targets, pattern)
        finally:
            if self._detail is not None:
                self._detail["asked"] = dict(self._asked)
                self._detail.update(monotonic_read_back(ctx, list(self._asked),
                                                        self._mono_base))

    def _stop(self, ctx: NemesisContext, targets: list[str], pattern: str) -> None:
        if pattern in ("jump", "back"):
            if self.clock_id(ctx.options) != "wall":  # a monotonic clock never goes back: it
                # runs on from where the jump took it (a ZooKeeper leader set back 60 s stayed
                # LEADING without a quorum and served no session)
                self._base = {n: self._asked.get(n, 0.0) for n in targets}
                self._detail = {"offset": 0, "kept": True,
                                "observed": self._move(ctx, targets, 0.0)}
                return
            ahead = any(v < 0 for v in self._asked.values())  # putting it back jumps ahead
            # also the run's last heal: the clients run until it is done
            aimed = aim_at(ctx, fresh=True, at_end=True) if ahead else None
            self._detail = {"offset": 0, "observed": self._move(ctx, targets, 0.0)}
            if aimed is not None and not hit(ctx, aimed):
                self._detail["missed"] = [aimed[0]]
            return
        self._halt.set()
        for thread in (self._thread, self._reader):
            if thread is not None:
                thread.join(10)
        if pattern == "strobe":
            observed = self._move(ctx, targets, 0.0)
            self._detail = {"offset": 0, "observed": observed, "flips": self._moves,
                            "observed-range": {k: [min(v for _, v in s), max(v for _, v in s)]
                                               for k, s in self._seen.items()}}
        else:  # a rate: one last step where it got to, kept (no jump at its end)
            rate = float(ctx.options.get("clock-rate", 2.0))
            elapsed = time.monotonic() - self._t0
            gained = (rate - 1.0) * elapsed
            observed = self._move(ctx, targets, gained)
            for name, seen in observed.items():
                self._seen.setdefault(name, []).append((elapsed, seen))
            self._base = {n: self._base.get(n, 0.0) + gained for n in targets}
            self._detail = {"rate": rate, "offset": round(gained, 3), "observed": observed,
                            "steps": self._moves + 1, "seconds": round(elapsed, 3),
                            "observed-rate": {k: observed_rate(s) for k, s in
                                              self._seen.items()}}
        if self._errors:
            raise RuntimeError(f"clock {pattern} stopped: {self._errors[0]}")

    def teardown(self, ctx: NemesisContext) -> None:
        self._halt.set()
        for thread in (self._thread, self._reader):
            if thread is not None:
                thread.join(10)
        self._base = {}
        if self.clock_id(ctx.options) != "wall":
            return  # never set back (see _stop); the servers stop with the run
        move(ctx, [n.name for n in ctx.nodes], 0.0)


ClockJump = Clock  # the name the family had when it was a jump alone

GO_STALL = ("; its monotonic clock is kept where the fault took it: moving a Go server's "
            "monotonic clock back (etcd's, through its vDSO) stalls its scheduler for as long "
            "as the move (8.0 s late after undoing an 8 s move, in 7 of 24 undos measured)")


def go_stall(detail: Any) -> str:
    """What a Go server (the vDSO patch) makes of its monotonic clock going back, for a fault
    that moved that clock: why the fault never sets it back."""
    moved = detail.get("clock") in ("monotonic", "both") and detail.get("mechanism") == "vdso"
    return GO_STALL if moved else ""


def observed_rate(seen: list[tuple[float, float]]) -> float | None:
    """The rate a node's clock ran at, from its read-backs (when, offset): the least-squares
    slope of the offsets, plus 1; None from fewer than two read-backs."""
    if len(seen) < 2:
        return None
    n = len(seen)
    mt = sum(t for t, _ in seen) / n
    mo = sum(o for _, o in seen) / n
    var = sum((t - mt) ** 2 for t, _ in seen)
    if var == 0:
        return None
    return round(1.0 + sum((t - mt) * (o - mo) for t, o in seen) / var, 4)


def move(ctx: NemesisContext, targets: list[str], offset: float) -> dict[str, float]:
    """Set each node's offset, then read each back until it shows (raises if one never does)."""
    return move_each(ctx, dict.fromkeys(targets, offset))


def move_each(ctx: NemesisContext, offsets: dict[str, float],
              mono_base: dict[str, float] | None = None) -> dict[str, float]:
    """Set each node's own offset, then read each back until it shows (``mono_base``: see
    :func:`observed_offset`)."""
    clock = Clock.clock_id(ctx.options)
    for name, offset in offsets.items():
        ctx.cluster.set_clock(ctx.node(name), offset, clock)
    return {name: verify(ctx, name, offset, mono_base) for name, offset in offsets.items()}


def monotonic_offsets(ctx: NemesisContext, targets: list[str]) -> dict[str, float]:
    """Each node's monotonic clock against ours, when the fault moves the monotonic clock and
    the DB reports it (``read_monotonic``: ZooKeeper's ``lresp``), else nothing. Only a change
    of it means something: libfaketime faking the monotonic clock gives it a base of its own
    (near the epoch), and on another host (ssh) it counts from that host's boot."""
    read = getattr(ctx.db, "read_monotonic", None)
    if Clock.clock_id(ctx.options) == "wall" or not callable(read):
        return {}
    seen = {}
    for name in targets:
        before = time.monotonic()
        value = float(read(ctx.node(name)))
        seen[name] = value - (before + time.monotonic()) / 2
    return seen


def monotonic_read_back(ctx: NemesisContext, targets: list[str],
                        base: dict[str, float]) -> dict[str, Any]:
    """``{"observed-monotonic": {node: offset}}``: how far each node's monotonic clock moved
    from ``base`` (read before the first fault, at offset 0); with the monotonic clock moved
    alone, ``observed-wall`` too: the wall clock it left where it was."""
    seen = monotonic_offsets(ctx, targets)
    if not seen:
        return {}
    out: dict[str, Any] = {"observed-monotonic": {n: round(v - base.get(n, 0.0), 3)
                                                  for n, v in seen.items()}}
    if Clock.clock_id(ctx.options) == "monotonic":
        out["observed-wall"] = {n: round(observed_offset(ctx, n), 3) for n in seen}
    return out


def observed_offset(ctx: NemesisContext, name: str,
                    mono_base: dict[str, float] | None = None) -> float:
    """The node's clock against ours: the wall clock (``read_clock``), or, when the fault
    moves the monotonic clock alone and the DB reports it (ZooKeeper), how far its monotonic
    clock moved from ``mono_base`` (read at offset 0, :func:`monotonic_offsets`)."""
    if mono_base and name in mono_base and Clock.clock_id(ctx.options) == "monotonic":
        return monotonic_offsets(ctx, [name])[name] - mono_base[name]
    before = time.time()
    db: ClockFaults = ctx.db
    node_clock = db.read_clock(ctx.node(name))
    after = time.time()
    return node_clock - (before + after) / 2


def verify(ctx: NemesisContext, name: str, offset: float,
           mono_base: dict[str, float] | None = None, timeout: float = 3.0) -> float:
    """Read the node's clock until it shows ``offset``; raise if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen = observed_offset(ctx, name, mono_base)
        except Exception as e:  # a server that crashed under the fault, say: one line
            said = " ".join(str(e).split()) or type(e).__name__
            raise RuntimeError(f"{name}: cannot read its clock back: {said}") from None
        if abs(seen - offset) <= TOLERANCE:
            return round(seen, 3)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: clock offset is {seen:+.2f} s, not {offset:+.2f} s: "
                               "the clock fault does not reach this server")
        time.sleep(0.05)
