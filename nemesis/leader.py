"""Faults aimed at the current leader of a consensus cluster (ZooKeeper, etcd).

The leader is where sessions and leases are tracked, so losing it is when a lock service has to
decide, in a new term, which sessions survived: ``partition-leader`` cuts it off from the other
nodes (it keeps its clients; a minority leader steps down, the majority elects a new one),
``pause-leader`` freezes it with SIGSTOP for longer than the TTL. The leader is found with the
DB's own probe (the ``HasLeader`` capability) right before each fault and recorded in the
history.
"""

from __future__ import annotations

from harness.core.capabilities import HasLeader, Iptables
from harness.core.cluster import NemesisContext
from nemesis import topology
from nemesis.base import node_target
from nemesis.partition import CutLinks
from nemesis.process_faults import PauseNode


class PartitionLeader(CutLinks):
    name = "partition-leader"
    summary = "cut the current leader off from the other DB nodes, past the TTL"
    requires = (HasLeader, Iptables)
    min_nodes = 2

    def select(self, ctx: NemesisContext, target: str | None = None) -> list[str] | None:
        leader = node_target(ctx, "leader")
        if leader is None or len(ctx.nodes) < 2:
            return None  # an election under way: try again at the next turn
        self._cuts = topology.cuts(topology.isolate([n.name for n in ctx.nodes], leader[0]))
        return leader


class PauseLeader(PauseNode):
    name = "pause-leader"
    summary = "SIGSTOP the current leader for longer than the TTL, then SIGCONT"
    requires = (HasLeader,)
    targets = ()
    default_target = "leader"
