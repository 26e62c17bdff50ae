"""Clock faults: move a node's wall clock with libfaketime, and check that it moved.

Every clock fault waits until somebody holds the lock (that is when a clock matters to a lease),
then moves the clocks of a set of DB nodes:

- ``clock``: a jump forward by ``clock-offset`` seconds (default +60): a lease stored there
  expires at once although its holder is still working (Kleppmann's Redlock scenario when the
  set is a majority);
- ``clock-back``: a jump back (default -60 s): leases there live that much longer;
- ``clock-strobe``: the clocks flip between the offset and the true time every
  ``clock-period`` seconds (default 0.2) for as long as the fault lasts.

The node set is the step's target role when it has one (``clock:all``, ``clock:node=n2``, a
schedule step's ``target``; any node role: ``any``, ``minority``, ``majority``, ``all``,
``leader``, ``node:NAME``), else option ``clock-nodes``: ``majority`` (default; the only node
of a single Redis), ``minority``, ``one``, ``all``, or names (``n1,n3``). Each change is
verified by reading the node's own clock back (Redis ``TIME``) and the observed offsets are
recorded in the history; healing puts the clocks back and verifies that too.

``clock`` and ``clock-back`` aim at a hold: the holder seen when the fault starts must still
hold once the move is verified, else the move may have landed after it let go and hit nobody's
lease (seen over SSH, where a move takes ~20 ms). Such a miss moves the clocks once more by the
same offset, for the hold in progress then, up to :data:`RETARGETS` times: the offsets add up
(+60, +120, ...), and the misses are in the fault's detail.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from harness.core.capabilities import CLOCK_IDS, ClockFaults, clock_unmet
from harness.core.cluster import NemesisContext
from harness.core.options import Option
from nemesis.base import NODE_TARGETS, BaseNemesis, node_target, wait_for_holder

TOLERANCE = 1.0  # seconds between the offset asked for and the one observed
RETARGETS = 5  # further moves when the hold a move was aimed at had ended before it landed


def choose_nodes(ctx: NemesisContext, how: Any) -> list[str]:
    """The node names a clock fault hits, from option ``clock-nodes``."""
    names = [n.name for n in ctx.nodes]
    n = len(names)
    if isinstance(how, list | tuple):
        chosen = [str(x) for x in how]
    elif isinstance(how, str) and how not in ("majority", "minority", "one", "all"):
        chosen = [x.strip() for x in how.replace("+", ",").split(",") if x.strip()]
    else:
        size = {"majority": n // 2 + 1 if n > 1 else 1, "minority": max(1, (n - 1) // 2),
                "one": 1, "all": n}[str(how)]
        chosen = ctx.rng.sample(names, size)
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise RuntimeError(f"clock-nodes names {unknown[0]!r}, not one of {', '.join(names)}")
    return sorted(chosen)


class ClockJump(BaseNemesis):
    name = "clock"
    summary = "jump the wall clock of a majority of DB nodes +60 s (libfaketime), verified"
    requires = (ClockFaults,)
    targets = NODE_TARGETS
    default_target = "majority"  # what option clock-nodes chooses by default
    default_offset = 60.0
    options = {
        "clock-offset": Option(float, None, "seconds to move the clocks (default +60, "
                               "clock-back -60)", minimum=-86400 * 365, maximum=86400 * 365),
        "clock-nodes": Option(str, "majority", "majority, minority, one, all, or node names "
                              "(n1,n3)"),
        "clock-id": Option(str, "wall", "the clock moved: wall, monotonic or both (wall and "
                           "monotonic by one offset)", choices=CLOCK_IDS),
    }

    @classmethod
    def clock_id(cls, options: dict[str, Any]) -> str:
        """The clock this run's clock faults move (one option for the run: a server under
        libfaketime is started faking what its faults move)."""
        return str(options.get("clock-id") or "wall")

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float,
               op_timeout: float | None) -> str | None:
        return clock_unmet(db, cls.clock_id(options))

    def __init__(self, offset: float | None = None) -> None:
        self._offset = offset
        self._detail: dict[str, Any] | None = None
        self._aim: tuple[int, float | None] | None = None  # (holder, since when) at select

    def offset(self, ctx: NemesisContext) -> float:
        if self._offset is not None:
            return self._offset
        offset = ctx.options.get("clock-offset")
        return float(self.default_offset if offset is None else offset)

    def setup(self, ctx: NemesisContext) -> None:
        choose_nodes(ctx, ctx.options.get("clock-nodes", "majority"))  # bad names: say so now

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        self._aim = aim(ctx)  # move clocks while a lease is held: that is when it hurts
        if target is not None:
            return node_target(ctx, target)
        return choose_nodes(ctx, ctx.options.get("clock-nodes", "majority"))

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        step = self.offset(ctx)
        offset, missed = step, []
        observed = move(ctx, targets, offset)
        for _ in range(RETARGETS):
            if self._aim is None or hit(ctx, self._aim):
                break
            missed.append(self._aim[0])
            self._aim = aim(ctx)
            if self._aim is None:  # nobody holds now: the next grant is already on the new clock
                break
            offset += step
            observed = move(ctx, targets, offset)
        self._detail = {"offset": offset, "observed": observed}
        if missed:
            self._detail["missed"] = missed

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._detail = {"offset": 0, "observed": move(ctx, targets, 0.0)}

    def detail(self) -> dict[str, Any] | None:
        return self._detail

    def teardown(self, ctx: NemesisContext) -> None:
        move(ctx, [n.name for n in ctx.nodes], 0.0)


class ClockBack(ClockJump):
    name = "clock-back"
    summary = "jump the wall clock of a majority of DB nodes back 60 s (libfaketime), verified"
    default_offset = -60.0


class ClockStrobe(ClockJump):
    """Flip the clocks between the offset and the true time until the fault stops."""

    name = "clock-strobe"
    summary = ("strobe the wall clock of a majority of DB nodes between +60 s and true time "
               "every 0.2 s (libfaketime), verified")
    options = {**ClockJump.options,
               "clock-period": Option(float, 0.2, "seconds between two flips", minimum=0.01,
                                      maximum=60)}

    def __init__(self, offset: float | None = None) -> None:
        super().__init__(offset)
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._seen: dict[str, list[float]] = {}
        self._flips = 0
        self._errors: list[str] = []

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        offset = self.offset(ctx)
        period = float(ctx.options.get("clock-period", 0.2))
        observed = move(ctx, targets, offset)
        self._seen = {k: [v] for k, v in observed.items()}
        self._flips, self._errors = 1, []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._strobe, args=(ctx, targets, offset, period),
                                        name="clock-strobe", daemon=True)
        self._thread.start()
        self._detail = {"offset": offset, "period": period, "observed": observed}

    def _strobe(self, ctx: NemesisContext, targets: list[str], offset: float,
                period: float) -> None:
        current = offset
        while not self._halt.wait(period):
            current = 0.0 if current else offset
            try:
                for name, seen in move(ctx, targets, current).items():
                    self._seen.setdefault(name, []).append(seen)
                self._flips += 1
            except Exception as e:  # recorded at stop; the final heal still runs
                self._errors.append(str(e))
                return

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(10)
        observed = move(ctx, targets, 0.0)
        self._detail = {"offset": 0, "observed": observed, "flips": self._flips,
                        "observed-range": {k: [min(v), max(v)] for k, v in self._seen.items()}}
        if self._errors:
            raise RuntimeError(f"clock strobe stopped: {self._errors[0]}")

    def teardown(self, ctx: NemesisContext) -> None:
        self._halt.set()
        super().teardown(ctx)


def aim(ctx: NemesisContext) -> tuple[int, float | None] | None:
    """The hold a clock move is aimed at: (holder, since when), None if nobody holds."""
    p = wait_for_holder(ctx)
    return None if p is None else (p, ctx.live.held_since(p))


def hit(ctx: NemesisContext, aimed: tuple[int, float | None]) -> bool:
    """Is the hold a move was aimed at still on, so that the move landed inside it?"""
    p, since = aimed
    return since is not None and ctx.live.held_since(p) == since


def move(ctx: NemesisContext, targets: list[str], offset: float) -> dict[str, float]:
    """Set each node's offset, then read each back until it shows (raises if one never does)."""
    clock = ClockJump.clock_id(ctx.options)
    for name in targets:
        ctx.cluster.set_clock(ctx.node(name), offset, clock)
    return {name: verify(ctx, name, offset) for name in targets}


def observed_offset(ctx: NemesisContext, name: str) -> float:
    before = time.time()
    db: ClockFaults = ctx.db
    node_clock = db.read_clock(ctx.node(name))
    after = time.time()
    return node_clock - (before + after) / 2


def verify(ctx: NemesisContext, name: str, offset: float, timeout: float = 3.0) -> float:
    """Read the node's clock until it shows ``offset``; raise if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        seen = observed_offset(ctx, name)
        if abs(seen - offset) <= TOLERANCE:
            return round(seen, 3)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: clock offset is {seen:+.2f} s, not {offset:+.0f} s: "
                               "libfaketime does not reach this server")
        time.sleep(0.05)
