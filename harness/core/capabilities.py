"""Capabilities: what a DB (or the environment) can do, as small protocols.

A nemesis declares what it ``requires``; :func:`unmet` says, in one line, why a DB cannot give
it (the registry asks, once, before anything starts). The fault menu thereby adapts to what
the DB can do, as Jepsen's ``db/Primary`` and ``satisfies?`` do: a DB gains a fault by
implementing a method, never by being named in a list somewhere.

DB capabilities are runtime-checkable protocols, matched by the methods a DB class has.
Environment capabilities (:class:`Iptables`) are asked of the backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from harness.core.cluster import Node


@runtime_checkable
class HasLeader(Protocol):
    """The DB can name the node that leads now (ZooKeeper's leader, etcd's, Sentinel's primary)."""

    def leader(self, nodes: Sequence[Node]) -> str | None: ...


@runtime_checkable
class HasCompanions(Protocol):
    """Besides its nodes, the DB runs helper processes (Redis Sentinels), started once the
    nodes are ready; ``client_options`` tells the clients where they are."""

    def companions(self, nodes: Sequence[Node]) -> list[tuple[Any, list[Node]]]: ...

    def client_options(self) -> dict[str, Any]: ...


@runtime_checkable
class Failover(Protocol):
    """A primary that something (Sentinel) replaces when it is lost; each node says its role."""

    def leader(self, nodes: Sequence[Node]) -> str | None: ...

    def role(self, node: Node) -> str | None: ...


@runtime_checkable
class ClockFaults(Protocol):
    """libfaketime reaches the server (``clock_fault_support`` is None, else the reason it does
    not) and the node reports its own clock, so that every jump is verified.

    A DB class also declares how its clocks are moved, ``clock_mechanism``: ``"libfaketime"``
    (the default when absent) or ``"vdso"`` (the running process's vDSO patched), and which
    clock ids a fault may name, ``clocks`` (default ``("wall",)``): ``"wall"`` (the realtime
    clock), ``"monotonic"``, ``"both"``."""

    def clock_fault_support(self) -> str | None: ...

    def read_clock(self, node: Node) -> float: ...


CLOCK_IDS = ("wall", "monotonic", "both")
MECHANISMS = ("libfaketime", "vdso")


def clock_mechanism(db: Any) -> str:
    return str(getattr(db, "clock_mechanism", "libfaketime"))


def clock_ids(db: Any) -> tuple[str, ...]:
    return tuple(getattr(db, "clocks", ("wall",)))


def patches_vdso(db: Any, clock: str) -> bool:
    """Do clock faults on clock id ``clock`` patch the server's vDSO (on this machine only)?
    A Go server's always; a server under libfaketime's for its monotonic clock alone."""
    return clock_mechanism(db) == "vdso" or clock == "monotonic"


def clock_unmet(db: Any, clock: str) -> str | None:
    """None when a clock fault on clock id ``clock`` can run on ``db``, else why not (one
    line). libfaketime moves the wall clock alone or both clocks together with one offset,
    never the monotonic clock alone; a DB under it that lists ``monotonic`` (ZooKeeper) has it
    moved alone by libfaketime moving both and the vDSO patch setting its wall clock back (the
    patch alone cannot: a JVM sleeps to absolute CLOCK_MONOTONIC deadlines the kernel counts
    on the true clock, so its timers would run late by the offset; tests/test_vdso_clock.py)."""
    name = getattr(db, "name", type(db).__name__)
    if clock not in CLOCK_IDS:
        return f"clock-id {clock!r} is not one of {', '.join(CLOCK_IDS)}"
    listed = clock_ids(db)
    if clock == "monotonic" and clock not in listed and clock_mechanism(db) == "libfaketime":
        return (f"{name}'s clocks are moved with libfaketime, which cannot move the monotonic "
                "clock alone (clock-id both moves wall and monotonic together)")
    if clock not in listed:
        return f"{name} moves its {' / '.join(listed)} clock, not clock-id {clock}"
    return None


@runtime_checkable
class Connections(Protocol):
    """The DB can say where its client connections come from (Redis ``CLIENT LIST``,
    ZooKeeper ``cons``): how the harness checks that each client connects from its own
    address, without which a partition of one client cuts nothing."""

    def connected_from(self, node: Node) -> list[str] | None: ...


@runtime_checkable
class Replication(Protocol):
    """Nodes replicate to each other over links the harness can name (for faults on them)."""

    def replication_links(self, nodes: Sequence[Node]) -> list[tuple[str, str]]: ...


@runtime_checkable
class RoutedPeers(Protocol):
    """The DB's nodes find each other at addresses the harness gives, so the links between
    them can run through the link layer: ``peer_ports`` are the ports nodes dial each other on
    (Redis's own port for replication and Sentinel, ZooKeeper's quorum and election ports),
    and ``route_peers`` is told, before the config files are written, where each
    (node, port) is to be reached instead (a "door" of the link layer)."""

    def peer_ports(self) -> list[int]: ...

    def route_peers(self, doors: Mapping[tuple[str, int], tuple[str, int]]) -> None: ...


@runtime_checkable
class Membership(Protocol):
    """Members can be removed from the running cluster and added to it (etcd's ``member
    remove`` / ``member add``, ZooKeeper's ``reconfig``), each change read back from the
    cluster: ``members`` maps each node that is a member now to the name it is one under (None:
    added, not started yet); ``joining`` reads back the configuration an added member joins
    ({name: peer address}), which ``join_empty`` writes into the node's config over an empty
    data directory (through :meth:`harness.core.cluster.NodeOps.join_empty`). A refused
    change raises (so does one whose answer was lost: the member list tells). A DB whose
    leader cannot leave as a member (Sentinel's primary leaves by failover) sets
    ``removes_leader = False``: a change aimed at no node in particular takes a follower. Both
    flags' defaults are :class:`dbs.base.DB`'s."""

    adds_running: ClassVar[bool]  # False: True adds a member once its node runs (REPLICAOF)
    removes_leader: ClassVar[bool]  # True

    def members(self, nodes: Sequence[Node]) -> dict[str, str | None]: ...

    def remove_member(self, nodes: Sequence[Node], name: str) -> None: ...

    def add_member(self, nodes: Sequence[Node], name: str, member: str) -> None: ...

    def joining(self, nodes: Sequence[Node], name: str, member: str) -> dict[str, str]: ...

    def join_empty(self, node: Node, node_dir: Path, member: str,
                   cluster: Mapping[str, str]) -> list[str]: ...


class Iptables:
    """Environment: the backend can cut links with iptables (root, the project's chain)."""

    debian_packages = {"iptables": "iptables"}  # what a host needs for it (harness doctor)


class ClientLinks:
    """Environment: one client's links can be cut alone (each client connects from an address
    of its own). The ssh backend has it only when the hosts file gives client addresses."""

    environment = True


class PacketRules:
    """Environment: besides cutting links, the backend can drop one direction of a link alone
    and a random share of a link's packets (iptables ``statistic``)."""

    environment = True
    debian_packages = {"iptables": "iptables"}


class LinkLayer:
    """Environment: the run's client connections go through the link layer, a proxy the
    harness controls per link and direction (delay, jitter, stalls, resets)."""

    environment = True


class PeerLinks:
    """Environment: the links between DB nodes go through the link layer too (the backend
    can give the nodes the proxy's addresses and the proxy their source addresses)."""

    environment = True


class PowerLoss:
    """Environment: each node's data directory is on a filesystem that holds what was not
    synced and can drop it (the backend mounts it, :mod:`harness.controller.syncfs`)."""

    environment = True


NEEDS: dict[type, str] = {
    HasLeader: "a db with a leader",
    HasCompanions: "a db with companion processes",
    Failover: "a db whose primary is failed over (redis-sentinel)",
    ClockFaults: "a db whose clock libfaketime moves and that reports its clock",
    Replication: "a db that replicates between its nodes",
    Connections: "a db that lists its client connections",
    Membership: "a db whose members can be removed and added while it runs",
    RoutedPeers: "a db whose nodes dial each other at addresses the harness gives",
    Iptables: "iptables (root)",
    ClientLinks: "clients with addresses of their own",
    PacketRules: "one-way and lossy links (iptables)",
    LinkLayer: "the link layer (a proxy on every client link)",
    PeerLinks: "links between the DB nodes through the link layer",
    PowerLoss: "a filesystem that forgets unsynced data (FUSE)",
}


def describe(capability: type) -> str:
    return NEEDS.get(capability, getattr(capability, "__name__", str(capability)))


def is_environment(capability: type) -> bool:
    return capability is Iptables or bool(getattr(capability, "environment", False))


GENERIC = "lacks it"  # what unmet() says when the only reason is a missing method


def unmet(capability: type, db: Any) -> str | None:
    """None when ``db`` (an instance) has ``capability``; else :data:`GENERIC`, or a reason of
    the DB's own (why libfaketime cannot reach it, say)."""
    if capability is ClockFaults:
        probe = getattr(db, "clock_fault_support", None)
        reason = probe() if callable(probe) else None
        if reason:
            return str(reason)
        if not callable(getattr(db, "read_clock", None)):
            return (f"{getattr(db, 'name', db)} cannot report its own clock, so a clock jump "
                    "could not be verified")
        return None
    return None if isinstance(db, capability) else GENERIC


def has(db: Any, capability: type) -> bool:
    return isinstance(db, capability)
