"""``clock-client``: move one client process's wall clock, a waiter's by default.

A lease timed by the clients rather than by the server (the DynamoDB locks: a waiter takes the
lock over once it has watched the holder's record unchanged for a lease of its own clock, or
once an expiry time the holder wrote is past on it) ends early for a waiter whose clock runs
fast or jumps ahead, while the holder, on a true clock, still works under it.

The clock is moved by patching the vDSO of the client process and of the lock program it
started, if any (the controller's :meth:`~harness.core.cluster.ClientOps.move_clock`), so they
alone see it: the other clients and the servers keep the true time. Only the wall clock is
moved: a client's monotonic clock also stamps the history (and the kernel times its sleeps
against the true one), so moving it would move the ops' times rather than test the lock.
Patterns:

- ``rate`` (default): the clock runs at ``client-clock-rate`` times real time (default 5)
  while the fault lasts: its offset grows by ``rate - 1`` seconds a second, in steps of
  :data:`STEP` s. A waiter watching a record that a heartbeat rewrites every ``h`` seconds sees
  one version for at most ``h`` real seconds, ``h * rate`` of its own: it takes over only if
  that reaches the lease (``rate >= lease / h``, 3 for the lock client's heartbeat of a third
  of the lease).
- ``jump``: the clock jumps ``client-clock-offset`` seconds ahead (default: two leases) at the
  start.

Healing puts the clock back to the true time. Each move is read back from the process itself
(:meth:`~harness.core.cluster.ClientOps.read_clock`: its own wall clock, as it reads it,
against ours; a lock program's, which answers no probe, from its patch: the least moved of
them counts): a jump once it is made, a rate every :data:`READ_PERIOD` s and at its end. The
read-backs are the fault's detail (``observed``: the last offset; a rate's ``observed-rate``,
the slope of its read-backs), and the fault's claim (``clock-moved``) holds the ``faults``
checker to them: a clock that was not seen to move as asked did not bite, and the run is
never VALID for it.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from typing import Any, ClassVar

from harness.core.cluster import NemesisContext, process_of
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import CLIENT_TARGETS, BaseNemesis, client_target, wait_for_holder
from nemesis.clock import observed_rate

STEP = 0.05  # seconds between two steps of a rate's offset
READ_PERIOD = 0.25  # seconds between two read-backs of a rate
PATTERNS = ("rate", "jump")


class ClientClock(BaseNemesis):
    name = "clock-client"
    summary = ("move a client's wall clock (a waiter's by default): it runs fast or jumps "
               "ahead, so a lease timed on it ends early there")
    targets = CLIENT_TARGETS
    default_target = "waiter"
    colour = "#8250df"
    options: ClassVar[dict[str, Option]] = {
        "client-clock-pattern": Option(str, "rate", "rate or jump", choices=PATTERNS),
        "client-clock-rate": Option(float, 5.0, "pattern rate: seconds of the client's clock "
                                    "per real second", minimum=1.0, maximum=100.0,
                                    patterns=("rate",)),
        "client-clock-offset": Option(float, None, "pattern jump: seconds ahead (default two "
                                      "leases)", minimum=0.001, maximum=3600.0,
                                      patterns=("jump",)),
    }

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._seen: dict[int, list[tuple[float, float]]] = {}  # process -> (when, offset)
        self._t0 = 0.0
        self._detail: dict[str, Any] = {}
        self._touched: set[int] = set()
        self._mu = threading.Lock()

    @classmethod
    def refuse(cls, db: Any, options: dict[str, Any], ttl: float, op_timeout: float
               ) -> str | None:
        if platform.machine() != "x86_64":
            return f"a client's clock is moved by a vDSO patch for x86_64, not {platform.machine()}"
        if os.geteuid() != 0:
            return "a client's clock is moved by patching its vDSO with ptrace, which needs root"
        return None

    @classmethod
    def pattern(cls, params: dict[str, Any]) -> str:
        return str(params.get("client-clock-pattern") or "rate")

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        detail = run.detail or {}
        how = (f"running at {detail.get('rate', '?')}x" if detail.get("pattern") == "rate"
               else f"jumping {detail.get('offset', 0):+g} s")
        return f"the wall clock of {run.who()} {how} {run.when()}"

    @classmethod
    def label(cls, params: dict[str, Any], detail: Any) -> str:
        """``client wall x5`` or ``+4 s client wall jump``: a report's fault lane."""
        d = detail if isinstance(detail, dict) else {}
        if (d.get("pattern") or cls.pattern(params)) == "rate":
            rate = d.get("rate", params.get("client-clock-rate"))
            return f"client wall x{rate:g}" if isinstance(rate, int | float) else "client rate"
        offset = d.get("offset", params.get("client-clock-offset"))
        return f"{offset:+g} s client wall jump" if isinstance(offset, int | float) else \
            "client wall jump"

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        if (target or self.default_target) == "waiter" and wait_for_holder(ctx) is None:
            return None  # a waiter's clock matters while somebody holds the lock
        return client_target(ctx, target, default="waiter")

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        pattern = str(ctx.options.get("client-clock-pattern") or "rate")
        processes = [process_of(t) for t in targets]
        self._touched.update(processes)
        self._stop.clear()
        self._seen, self._t0 = {}, time.monotonic()
        if pattern == "jump":
            offset = float(ctx.options.get("client-clock-offset") or 2 * ctx.ttl)
            for p in processes:
                ctx.clients.move_clock(p, "wall", offset)
            self._read(ctx, processes)
            self._detail = {"pattern": "jump", "offset": offset, **self._observed()}
            return
        rate = float(ctx.options.get("client-clock-rate") or 5.0)
        self._detail = {"pattern": "rate", "rate": rate}
        self._read(ctx, processes)
        self._threads = [threading.Thread(target=run, args=(ctx, processes, rate),
                                          name=f"clock-client-{run.__name__}", daemon=True)
                         for run in (self._steps, self._reads)]
        for thread in self._threads:
            thread.start()

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        asked = {"offset": self._detail["offset"]} if self._detail.get("pattern") == "jump" \
            else {"rate": self._detail["rate"]}
        return {"clock-moved": {"processes": [process_of(t) for t in targets], **asked}}

    def _steps(self, ctx: NemesisContext, processes: list[int], rate: float) -> None:
        while not self._stop.wait(STEP):
            offset = (rate - 1.0) * (time.monotonic() - self._t0)
            for p in processes:
                ctx.clients.move_clock(p, "wall", offset)

    def _reads(self, ctx: NemesisContext, processes: list[int], rate: float) -> None:
        while not self._stop.wait(READ_PERIOD):
            self._read(ctx, processes)

    def _read(self, ctx: NemesisContext, processes: list[int]) -> None:
        """Read each process's clock back (one that does not answer adds nothing)."""
        for p in processes:
            seen = ctx.clients.read_clock(p)
            if seen is not None:
                with self._mu:
                    self._seen.setdefault(p, []).append((seen[1] - self._t0, seen[0]))

    def _observed(self) -> dict[str, Any]:
        with self._mu:
            return {"observed": {str(p): round(s[-1][1], 3) for p, s in self._seen.items()}}

    def detail(self) -> dict[str, Any] | None:
        return dict(self._detail) or None

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5.0)
        self._threads = []
        if self._detail.get("pattern") == "rate":  # its last read-back, where it got to
            self._read(ctx, [process_of(t) for t in targets])
            self._detail.update(self._observed(), **{
                "observed-rate": {str(p): observed_rate(s) for p, s in self._seen.items()},
                "reads": {str(p): len(s) for p, s in self._seen.items()}})
        for t in targets:
            ctx.clients.move_clock(process_of(t), "wall", 0.0)
            self._touched.discard(process_of(t))

    def teardown(self, ctx: NemesisContext) -> None:
        self._stop.set()
        for p in sorted(self._touched):
            ctx.clients.move_clock(p, "wall", 0.0)
        self._touched.clear()
