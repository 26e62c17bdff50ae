"""Live state of a running test, read from the journals as they grow.

The nemesis asks it who holds the lock right now (to pause or cut off exactly that client), and
the progress line asks it how many ops and lock overlaps there have been so far. It only reads
the journals (the clients write them), so it sees what the history will say; the overlaps are
counted as the mutex checker counts them (pairs of grants whose held spans intersect, a grant
ending at its release's invocation or its process's next acquire), recounted from every grant
seen whenever asked, so a journal read late corrects the count rather than adding a false one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson

from checker.intervals import overlapping
from harness.core.journal import read_lines


class JournalTail:
    """The whole lines a journal gained since the last read (a line still being written, and
    the space its writer reserved beyond it, wait for the next)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # read and parsed up to here
        self.scanned = 0  # last_op() read up to here
        self.last = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as fh:
                data, self.offset = read_lines(fh, self.offset)
        except FileNotFoundError:
            return []
        ops = []
        for line in data.split(b"\n")[:-1]:
            try:
                ops.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
        return ops

    def last_op(self) -> dict[str, Any] | None:
        """The journal's last whole line, parsed alone (the lines before it are only looked
        through for their newlines); None before the first, or when it cannot be parsed."""
        try:
            with self.path.open("rb") as fh:
                data, self.scanned = read_lines(fh, self.scanned)
        except FileNotFoundError:
            return None
        if data:
            self.last = data[data.rfind(b"\n", 0, len(data) - 1) + 1:-1]
        try:
            return orjson.loads(self.last) if self.last else None
        except orjson.JSONDecodeError:
            return None


class LiveState:
    """``follow``: the journals are read as they grow (a fault asks who holds the lock now).
    Without it nothing reads them while the load runs but the progress line, when it prints,
    and :meth:`in_flight` only looks at each journal's last line."""

    def __init__(self, journals: dict[int, Path], *, follow: bool = True,
                 t0_ns: int | None = None) -> None:
        self.follow = follow
        self.t0_ns = t0_ns  # the run's start (time.monotonic_ns()), as the journals count
        self.tails = {p: JournalTail(path) for p, path in journals.items()}
        self.holding: dict[int, float] = {}  # process -> time (s) it acquired
        self.waiting: dict[int, float] = {}  # process -> time (s) it began an acquire
        self.completed: set[int] = set()  # processes that completed an op
        self.pending: set[int] = set()  # processes with an op in flight
        self.forgotten: set[int] = set()  # processes that are gone
        self.lock_of: dict[int, Any] = {}  # process -> the lock it last acquired
        self.wrote: dict[int, bool] = {}  # holder -> a write of its hold in flight now
        self.ops = 0
        self.acquired = 0
        self._grants: dict[Any, list[list[float]]] = {}  # lock -> [start, end] (s)
        self._open: dict[int, list[float]] = {}  # process -> its grant not yet let go
        self._counted: tuple[int, int] = (0, 0)  # (grants changed, overlaps) at the last count
        self._changes = 0
        self._now = 0.0  # the latest op seen (s)
        self._mu = threading.Lock()

    def refresh(self) -> None:
        with self._mu:
            new = [op for tail in self.tails.values() for op in tail.read_new()]
            for op in sorted(new, key=lambda o: o.get("time", 0)):
                self._apply(op)

    def _apply(self, op: dict[str, Any]) -> None:
        # Called for every op of every client while the load runs, in the controller's one
        # process: kept to a few dictionary lookups per op.
        p, f, t = op.get("process"), op.get("f"), op.get("type")
        self._now = max(self._now, op.get("time", 0) / 1e9)
        if not isinstance(p, int):
            if t == "invoke":
                self.ops += 1
            return
        if t == "invoke":
            self.ops += 1
            self.pending.add(p)
            if f in ("acquire", "release") and (g := self._open.pop(p, None)) is not None:
                g[1] = op["time"] / 1e9  # let go: released, or acquiring anew
                self._changes += 1
            if f == "acquire":
                self.waiting[p] = op["time"] / 1e9
                self.wrote.pop(p, None)
            elif f == "release":
                self.holding.pop(p, None)
                self.wrote.pop(p, None)
            elif f == "write" and p in self.holding:
                self.wrote[p] = True
            return
        self.completed.add(p)
        self.pending.discard(p)
        if (f == "write" and p in self.wrote) or (f == "read" and t == "ok" and p in self.holding):
            self.wrote[p] = False  # between two of its resource ops: a read-modify-write's
            # holder that has read what its write will be computed from is there too
        if f != "acquire":
            return
        self.waiting.pop(p, None)
        if t != "ok":
            return
        lock = op.get("lock")
        self.lock_of[p] = lock
        self._open[p] = [op["time"] / 1e9, float("inf")]
        self._grants.setdefault(lock, []).append(self._open[p])
        self._changes += 1
        self.holding[p] = op["time"] / 1e9
        self.acquired += 1

    @property
    def overlaps(self) -> int:
        """Pairs of grants of one lock whose held spans intersect, among the grants seen so
        far (as the mutex checker counts ``lock-overlap-count``)."""
        with self._mu:
            if self._counted[0] != self._changes:
                n = sum(overlapping(sorted(gs), lambda g: g[0], lambda g: g[1], 0)[0]
                        for gs in self._grants.values())
                self._counted = (self._changes, n)
            return self._counted[1]

    def holders(self) -> list[int]:
        """Clients that believe they hold the lock now (acquired, not yet releasing)."""
        self.refresh()
        with self._mu:
            return sorted(self.holding, key=self.holding.__getitem__)

    def held_since(self, process: int) -> float | None:
        """When the client's current hold began (s into the run), or None if it holds none."""
        self.refresh()
        with self._mu:
            return self.holding.get(process)

    def holds(self) -> dict[int, float]:
        """Every client holding now and when its hold began (s into the run), from one read."""
        self.refresh()
        with self._mu:
            return dict(self.holding)

    def now(self) -> float | None:
        """Seconds into the run now, as the journals' times count them (None: the start is
        not known)."""
        return None if self.t0_ns is None else (time.monotonic_ns() - self.t0_ns) / 1e9

    def writes(self) -> dict[int, bool]:
        """Each holder that has begun a write or read in its current hold: True while a write
        is in flight, False once its last write or read has completed (between two of its
        resource ops: for the counter, after the read its write is computed from)."""
        self.refresh()
        with self._mu:
            return {p: w for p, w in self.wrote.items() if p in self.holding}

    def in_flight(self) -> list[int]:
        """Clients with an op invoked and not yet completed (whatever it is)."""
        if not self.follow:  # a client's ops follow one another: is its last an invoke?
            with self._mu:
                last = {p: tail.last_op() for p, tail in self.tails.items()}
                return sorted(p for p, op in last.items() if p not in self.forgotten
                              and op is not None and op.get("type") == "invoke")
        self.refresh()
        with self._mu:
            return sorted(self.pending)

    def invoked(self) -> dict[int, Any]:
        """Each client with an op in flight now, and the time of that op's invocation (from
        each journal's last line: whether or not the journals are followed)."""
        with self._mu:
            last = {p: tail.last_op() for p, tail in self.tails.items()
                    if p not in self.forgotten}
        return {p: op.get("time") for p, op in last.items()
                if op is not None and op.get("type") == "invoke"}

    def settle(self, seconds: float, poll: float = 0.02) -> list[int]:
        """Wait until every op in flight now has completed (each of those clients has heard
        back: its journal's last line is no longer that invocation), ``seconds`` at most; the
        clients whose op has not. Ops invoked meanwhile are not waited for: under a busy load
        some op is always in flight, and they were not cut off by anything."""
        deadline = time.monotonic() + seconds
        cut = self.invoked()
        while cut and time.monotonic() < deadline:
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
            now = self.invoked()
            cut = {p: t for p, t in cut.items() if now.get(p) == t}
        return sorted(cut)

    def running(self, processes: list[int]) -> bool:
        """Has every one of ``processes`` invoked an op (or gone)?"""
        self.refresh()
        with self._mu:
            return all(p in self.pending or p in self.completed or p in self.forgotten
                       for p in processes)

    def all_started(self, processes: list[int]) -> bool:
        """Has every one of ``processes`` completed at least one op?"""
        self.refresh()
        with self._mu:
            return all(p in self.completed for p in processes)

    def waiters(self) -> list[int]:
        """Clients blocked in an acquire now (invoked, not completed), longest first."""
        self.refresh()
        with self._mu:
            return sorted(self.waiting, key=self.waiting.__getitem__)

    def forget(self, process: int) -> None:
        """A client that is gone (killed) holds and wants nothing any more."""
        with self._mu:
            self.forgotten.add(process)
            if (g := self._open.pop(process, None)) is not None:  # gone: its grant ends
                g[1] = max(g[0], self._now)  # no later than the latest op seen (its crash)
                self._changes += 1
            self.holding.pop(process, None)
            self.waiting.pop(process, None)
            self.wrote.pop(process, None)
            self.pending.discard(process)
