"""Faults. Each fault kind is a Nemesis; a schedule composes them; a final heal always runs."""

from __future__ import annotations

from collections.abc import Callable

from harness.errors import UsageError
from nemesis.base import Nemesis
from nemesis.clock import ClockBack, ClockJump, ClockStrobe
from nemesis.crash_client import CrashClient
from nemesis.failover import SentinelFailover
from nemesis.kill_majority import KillMajority
from nemesis.leader import PartitionLeader, PauseLeader
from nemesis.minority import PartitionMinority
from nemesis.partition import IsolateHolder, NodePartition
from nemesis.process_faults import KillNode, PauseHolder, PauseNode
from nemesis.topology import KINDS

FACTORIES: dict[str, Callable[[], Nemesis]] = {
    "pause": PauseHolder,
    "pause-node": PauseNode,
    "kill": KillNode,
    "partition": IsolateHolder,
    "clock": ClockJump,
    **{f"partition-{k}": (lambda k=k: NodePartition(k)) for k in KINDS},
    "partition-leader": PartitionLeader,
    "pause-leader": PauseLeader,
}
FACTORIES.update({  # the Redis family's faults (Redlock, Sentinel, crashes, clocks)
    "clock-back": ClockBack,
    "clock-strobe": ClockStrobe,
    "kill-majority": KillMajority,
    "kill-majority-delayed": lambda: KillMajority(delayed=True),
    "partition-minority": PartitionMinority,
    "failover": SentinelFailover,
    "crash-client": CrashClient,
})
NEEDS_IPTABLES = {name for name in FACTORIES if name.startswith("partition")} | {"failover"}
NEEDS_CLOCK = {"clock", "clock-back", "clock-strobe"}
NEEDS_LEADER = {"partition-leader", "pause-leader"}  # the db must have leader(nodes)


def names() -> list[str]:
    return ["none", *FACTORIES]


def summaries() -> dict[str, str]:
    out = {"none": "no faults: the baseline every lock should pass"}
    out.update({name: make().summary for name, make in FACTORIES.items()})
    return out


def parse(spec: str) -> list[str]:
    """``pause,kill`` -> ["pause", "kill"]; ``none`` -> []."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise UsageError("--nemesis is empty: use none, or one or more of "
                         + ", ".join(FACTORIES))
    unknown = [p for p in parts if p not in FACTORIES and p != "none"]
    if unknown:
        raise UsageError(f"unknown nemesis {unknown[0]!r}: use none, or one or more of "
                         + ", ".join(FACTORIES))
    return [p for p in parts if p != "none"]


def build(names_: list[str]) -> list[Nemesis]:
    return [FACTORIES[n]() for n in names_]
