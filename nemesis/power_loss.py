"""A power loss of DB nodes: SIGKILL the server, then drop every byte it wrote and had not
synced (its data directory is on :mod:`harness.controller.syncfs`, mounted by the backend for
runs with this fault), then restart it: at once (``restart=now``), or once every lock it knew
has expired (``restart=delayed``: down for the TTL plus a second, antirez's remedy).

A plain ``kill`` loses nothing that reached ``write()`` (the kernel still writes it), so a Redis
with ``appendfsync everysec`` looks as safe as ``always`` under it; a power loss does not. It
strikes at a fresh grant (the first hold that begins once the fault is due): that is when the
grant's write is the newest and least likely to be synced (``everysec`` syncs it within about a
second). What it dropped, per node and file, is the fault's detail and its claim
(``{"dropped": bytes}``): the faults checker tells a loss that dropped nothing and caught no
lock op in flight (a plain crash: the expected outcome with ``appendfsync always``) from one
that lost data.

Once, as the load starts, everything the servers wrote while they set up is written back: a
real server that has run a while has it on disk (Linux writes dirty pages back within about
30 s), and runs here are shorter than that. Without it, a ZooKeeper node whose initial
snapshot (never fsynced by ZooKeeper) was dropped refuses to start at all. The set-up includes
the clients' (each lock's ``setup()``: the DynamoDB locks' table, which dynalite never syncs),
so the write-back waits for the load to be up, every client having invoked an op, as Jepsen
sets its clients up before the first fault: a power loss then tests the lock's own writes, not
the creation of its table. What was written back is in every fault's detail
(``written-back``: bytes, by node).

Between the drop and the restart each node's DB repairs what its own fixed release would
repair at its start, and nothing more (``repair_before_restart``; ZooKeeper 3.8.0 does not
start on an empty tail transaction log, which 3.9.3 deletes: ZOOKEEPER-2332): the run tests the
lock, not a start-up bug fixed upstream. What was repaired is in the fault's detail
(``repaired``: words, by node) and its description; ``repair=false`` leaves the data as the
loss left it, and shows the bug (the node does not come back: exit 3).
"""

from __future__ import annotations

from typing import Any

from harness.core.capabilities import PowerLoss as OnSyncFS
from harness.core.cluster import NemesisContext
from harness.core.fault_run import FaultRun
from harness.core.options import Option
from nemesis.base import NODE_TARGETS, BaseNemesis, node_target, wait_for_fresh_grant
from nemesis.process_faults import KILLED, REPAIR, kill, repaired_words, restart


def dropped_words(detail: Any) -> str:
    nodes = detail.get("dropped") if isinstance(detail, dict) else None
    if not isinstance(nodes, dict):
        return ""
    total = sum(int(b) for b in nodes.values() if isinstance(b, int))
    if not total:
        return ", nothing unsynced dropped"
    each = ", ".join(f"{n} {b}" for n, b in nodes.items() if b)
    return f", {total} unsynced bytes dropped ({each})"


class PowerLoss(BaseNemesis):
    name = "power-loss"
    summary = ("SIGKILL DB nodes at a fresh grant and drop what they had not fsynced, restart "
               "them (restart=now|delayed)")
    targets = NODE_TARGETS
    default_target = "majority"
    requires = (OnSyncFS,)
    colour = KILLED
    options = {"restart": Option(str, "now", "now, or delayed: the nodes stay down for the "
                                 "TTL + 1 s", choices=("now", "delayed")),
               "repair": REPAIR}

    def __init__(self) -> None:
        self.dropped: dict[str, dict[str, Any]] = {}
        self.repaired: dict[str, list[str]] = {}
        self.written_back: dict[str, int] | None = None

    def load_started(self, ctx: NemesisContext) -> None:
        self.written_back = {n.name: int(ctx.cluster.write_back(n).get("bytes", 0))
                             for n in ctx.nodes}

    @classmethod
    def describe(cls, run: FaultRun) -> str:
        back = "" if run.held is None else f", restarted after {run.held:.1f} s"
        return (f"a power loss (SIGKILL, unsynced data dropped) of {run.who()} at "
                f"{run.start:.1f} s{dropped_words(run.detail)}{repaired_words(run.detail)}"
                f"{back}")

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        wait_for_fresh_grant(ctx)
        return node_target(ctx, target, "majority")

    def start(self, ctx: NemesisContext, targets: list[str]) -> None:
        for t in targets:  # the power goes out everywhere at once: nothing syncs after it
            ctx.cluster.pause(ctx.node(t))
        kill(ctx, targets)
        self.dropped = {t: ctx.cluster.drop_unsynced(ctx.node(t)) for t in targets}
        self.repaired = {}
        if ctx.options.get("repair", True):
            for t in targets:
                done = ctx.cluster.repair_before_restart(ctx.node(t))
                if done:
                    self.repaired[t] = done

    def detail(self) -> dict[str, Any] | None:
        return {"dropped": {n: int(d.get("bytes", 0)) for n, d in self.dropped.items()},
                "files": {n: d.get("files", {}) for n, d in self.dropped.items()},
                "written-back": self.written_back or {},
                **({"repaired": dict(self.repaired)} if self.repaired else {})}

    def expect(self, ctx: NemesisContext, targets: list[str]) -> dict[str, Any] | None:
        return {"dropped": sum(int(d.get("bytes", 0)) for d in self.dropped.values())}

    def duration(self, ctx: NemesisContext) -> float:
        return ctx.ttl + 1.0 if ctx.options.get("restart") == "delayed" else 0.0

    def stop(self, ctx: NemesisContext, targets: list[str]) -> None:
        for node, words in restart(ctx, targets).items():  # (the start's repair did it all)
            self.repaired.setdefault(node, []).extend(words)

    def teardown(self, ctx: NemesisContext) -> None:
        restart(ctx, [n.name for n in ctx.nodes])
