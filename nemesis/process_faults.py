"""Faults on processes: pause a client (the holder by default), pause a server, kill and restart
a server.

A pause of the holder strikes at a moment of its critical section (option ``pause-at``, read
from the journals, where every write is invoked before it is sent): ``between-writes`` (the
default) once a write (or a read) of its hold has completed and before the next write begins,
so that the next holder's writes land between the two (Kleppmann's pause: CI froze a
``pg-advisory`` holder inside a write twice, and nothing interleaved; the counter's holder is
paused between the read its write is computed from and that write: under load its holds had
0.1-0.3 s from read to write, and a run skipped both steps waiting for 0.25 s without one);
``in-write`` while a write is in flight; ``hold`` anywhere in a hold. A holder that has written
nothing :data:`GRACE` seconds into its hold (a workload that holds without writing) is paused
between writes as it is."""

from __future__ import annotations

import time
from typing import Any

from harness.core.capabilities import HasLeader
from harness.core.cluster import NemesisContext, client_name, process_of
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import (
    CLIENT_TARGETS,
    HOLDER_WAIT,
    NODE_TARGETS,
    RETARGETS,  # noqa: F401 (the bound of its aim, nemesis.base.strike: read here)
    BaseNemesis,
    client_target,
    node_target,
    strike,
    wait_for,
)

READY_TIMEOUT = 20.0
SETTLE = 0.02  # seconds for a stopped client's last journal line to be readable
PAUSED, KILLED = "#9a6700", "#a40e26"  # the colours of their bars on the report's timeline
MOMENTS = ("between-writes", "in-write", "hold")  # where in its hold a holder is paused
GRACE = 0.25  # seconds of a hold without a write begun: its workload writes nothing first


REPAIR = Option(bool, True, "before a restart, repair what the DB's fixed release repairs at its "
                "start (ZooKeeper: an empty tail transaction log, ZOOKEEPER-2332), saying so in "
                "the fault's detail; false shows the bug")


def repaired_words(detail: Any) -> str:
    """``, repaired before the restart: n2 ZOOKEEPER-2332: ...`` ("" when nothing was)."""
    nodes = detail.get("repaired") if isinstance(detail, dict) else None
    if not isinstance(nodes, dict):
        return ""
    each = "; ".join(f"{n} {' '.join(map(str, w))}" for n, w in sorted(nodes.items())
                     if isinstance(w, list) and w)
    return f", repaired before the restart: {each}" if each else ""


def paused(run: FaultRun) -> str:
    return f"a pause (SIGSTOP) of {run.who()} {run.when()}"


def killed(run: FaultRun) -> str:
    back = "" if run.held is None else f", restarted after {run.held:.1f} s"
    return f"a kill (SIGKILL) of {run.who()} at {run.start:.1f} s{back}{repaired_words(run.detail)}"


def at_moment(ctx: NemesisContext, moment: str, seen: dict[tuple[int, float], float]
              ) -> list[int]:
    """The holders at ``moment`` of their hold now, newest hold first. ``seen``: when each hold
    was first seen (a hold with no write begun :data:`GRACE` seconds after counts as between
    writes)."""
    holds = ctx.live.holds()
    if moment == "hold":
        return sorted(holds, key=holds.__getitem__, reverse=True)
    writes, now = ctx.live.writes(), time.monotonic()
    picked = [p for p, w in writes.items() if p in holds and w == (moment == "in-write")]
    if not picked and moment == "between-writes":
        picked = [p for p, since in holds.items() if p not in writes
                  and now - seen.setdefault((p, since), now) > GRACE]
    return sorted(picked, key=holds.__getitem__, reverse=True)


def landed(ctx: NemesisContext, targets: list[str], moment: str) -> bool:
    """Are the (just frozen) ``targets`` still at ``moment`` of a hold: holding, and (but for
    ``hold``) inside a write or not, as asked?"""
    time.sleep(SETTLE)
    holders, writes = set(ctx.live.holders()), ctx.live.writes()
    ps = [process_of(t) for t in targets]
    if moment == "in-write":
        return all(writes.get(p) is True for p in ps)
    return all(p in holders and (moment == "hold" or writes.get(p) is not True) for p in ps)


def freeze(ctx: NemesisContext, targets: list[str], on: bool = True) -> None:
    """SIGSTOP (``on``) or SIGCONT each client of ``targets``."""
    for t in targets:
        (ctx.clients.pause if on else ctx.clients.resume)(process_of(t))


class PauseHolder(BaseNemesis):
    """SIGSTOP the client that holds the lock right now, for longer than the TTL, then SIGCONT.

    The paused process is frozen whole (renewal threads too), like a long GC pause: when it
    wakes up it still believes it holds the lock.
    """

    name = "pause"
    summary = ("SIGSTOP the client holding the lock (between two of its writes) for longer than "
               "the TTL, then SIGCONT")
    targets = CLIENT_TARGETS
    role = "holder"
    moment = MOMENTS[0]
    missed: list[str] = []
    colour = PAUSED
    options = {"pause-at": Option(str, MOMENTS[0], "the holder's moment: between-writes "
                                  "(default), in-write (a write in flight), hold (anywhere)",
                                  choices=MOMENTS)}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return paused(run)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        self.role = target or "holder"
        self.moment = str(ctx.options.get("pause-at") or MOMENTS[0])
        return self.holder(ctx) if self.role == "holder" else client_target(ctx, target)

    def holder(self, ctx: NemesisContext) -> list[str] | None:
        """The holder at the moment asked for (none within :data:`HOLDER_WAIT`: None)."""
        seen: dict[tuple[int, float], float] = {}
        p = wait_for(ctx, lambda: at_moment(ctx, self.moment, seen), HOLDER_WAIT)
        return None if p is None else [client_name(p)]

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        """Freeze ``targets``, aimed at the holder's moment (:func:`nemesis.base.strike`): a miss
        is woken, ``targets`` updated in place to the holder then; the misses are its detail."""
        self.missed = []
        strike(lambda: freeze(ctx, targets), lambda: self.role != "holder" or landed(
            ctx, targets, self.moment), lambda: self.again(ctx, targets))

    def again(self, ctx: NemesisContext, targets: list[str]) -> bool:
        freeze(ctx, targets, on=False)
        again = self.holder(ctx)
        if again is None:  # nobody holds it any more: freeze the first pick after all
            freeze(ctx, targets)
            return False
        self.missed += targets
        targets[:] = again
        return True

    def detail(self) -> dict[str, Any] | None:
        return {"missed": list(self.missed)} if self.missed else None

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"frozen": [process_of(t) for t in targets]}

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        freeze(ctx, targets, on=False)

    def teardown(self, ctx: NemesisContext) -> None:
        freeze(ctx, [client_name(p) for p in ctx.clients.processes], on=False)


class PauseNode(BaseNemesis):
    """SIGSTOP a server node for longer than the TTL, then SIGCONT. Its alias
    ``pause-leader`` freezes the current leader of a consensus cluster (ZooKeeper, etcd): the
    leader is where sessions and leases are tracked, so losing it is when a lock service has to
    decide, in a new term, which sessions survived. It is found with the DB's own probe (the
    ``HasLeader`` capability) right before each fault and recorded in the history."""

    name = "pause-node"
    summary = "SIGSTOP a DB server node for longer than the TTL, then SIGCONT"
    targets = NODE_TARGETS
    colour = PAUSED
    aliases = {"pause-leader": {
        "summary": "SIGSTOP the current leader for longer than the TTL, then SIGCONT",
        "requires": (HasLeader,), "targets": (), "default_target": "leader"}}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return paused(run)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        return node_target(ctx, target, self.default_target or "any")

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.cluster.pause(ctx.node(t))
        time.sleep(0.05)
        still = [t for t in targets if ctx.cluster.answers(ctx.node(t))]
        if still:
            raise RuntimeError(f"{', '.join(still)} still answered after SIGSTOP: the pause "
                               "did not bite")

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:
            ctx.cluster.resume(ctx.node(t))

    def teardown(self, ctx: NemesisContext) -> None:
        for node in ctx.nodes:
            ctx.cluster.resume(node)


class KillNode(BaseNemesis):
    """SIGKILL a server node, then restart it (with whatever its persistence kept)."""

    name = "kill"
    summary = "SIGKILL a DB server node, restart it after a few seconds"
    targets = NODE_TARGETS
    colour = KILLED
    options = {"repair": REPAIR}

    def __init__(self) -> None:
        self.repaired: dict[str, list[str]] = {}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        return killed(run)

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        return node_target(ctx, target)

    def duration(self, ctx: NemesisContext) -> float:
        return ctx.rng.uniform(1.0, 3.0)

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.repaired = {}
        kill(ctx, targets)

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        self.repaired = restart(ctx, targets)

    def detail(self) -> dict[str, Any] | None:
        return {"repaired": dict(self.repaired)} if self.repaired else None

    def teardown(self, ctx: NemesisContext) -> None:
        restart(ctx, [n.name for n in ctx.nodes])


def kill(ctx: NemesisContext, names: list[str]) -> None:
    """SIGKILL every named node, then check that each is gone and no longer answers."""
    for n in names:
        ctx.cluster.kill(ctx.node(n))
    alive = [n for n in names if ctx.cluster.is_running(ctx.node(n))
             or ctx.cluster.answers(ctx.node(n))]
    if alive:
        raise RuntimeError(f"{', '.join(alive)} still ran or answered after SIGKILL: the kill "
                           "did not bite")


def restart(ctx: NemesisContext, names: list[str]) -> dict[str, list[str]]:
    """Start every named node that is down, all before waiting for any; each first repaired
    as its DB's fixed release would repair it at its start (option ``repair``; a backend that
    cannot reach the node's directory, ssh, has no repair). What was repaired, by node: a
    kill can leave what a power loss leaves (ZooKeeper killed between a new log's creation and
    its header's write: ZOOKEEPER-2332)."""
    down = [ctx.node(n) for n in names if not ctx.cluster.is_running(ctx.node(n))]
    repair = getattr(ctx.cluster, "repair_before_restart", None)
    repaired: dict[str, list[str]] = {}
    for node in down:
        if callable(repair) and ctx.options.get("repair", True):
            done = list(repair(node))
            if done:
                repaired[node.name] = done
        ctx.cluster.start(node)
    for node in down:
        ctx.cluster.wait_ready(node, READY_TIMEOUT)
    return repaired
