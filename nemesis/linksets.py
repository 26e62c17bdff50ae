"""What the network faults share: which links a fault hits, and what the link layer says it did.

A *link set* names links by role, resolved when the fault starts: ``clients`` (every client's
links to every DB endpoint), ``holder`` / ``waiter`` / ``any`` / ``client:N`` (one client's), a
``waiters`` set (every client blocked in an acquire), ``peers`` (the links between DB nodes) or
``all``. The faults on the link layer (delay, stalls, replication lag) get link names
(``c3>n1``, ``n2>n1``) from ``ctx.links``; those on iptables (loss) get endpoint pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.core.capabilities import HasLeader, LinkLayer, PeerLinks, Replication, RoutedPeers
from harness.core.cluster import LinkOps, NemesisContext, client_name, link_ends
from nemesis import topology
from nemesis.base import TargetError, client_target, wait_for

SETS = ("clients", "holder", "waiter", "waiters", "any", "peers", "all")
DIRECTIONS = ("both", "up", "down")


def link_layer(ctx: NemesisContext) -> LinkOps:
    if ctx.links is None:  # the registry checks LinkLayer first: a harness bug if it happens
        raise RuntimeError("this run has no link layer")
    return ctx.links


def talks_between_nodes(db: Any) -> bool:
    """Do the DB's nodes talk to each other (so that links between them carry anything)?"""
    return isinstance(db, Replication | HasLeader | RoutedPeers)


def needs_for(which: str | None) -> tuple[type, ...]:
    """What a link set needs of the environment, for the link layer's faults."""
    if which in ("peers", "all"):
        return (LinkLayer, PeerLinks)
    return (LinkLayer,)


def refuse_set(which: str | None, db: Any, *, proxied: bool) -> str | None:
    """Why the link set ``which`` cannot be hit on ``db`` (None: it can)."""
    if which not in ("peers", "all"):
        return None
    name = getattr(db, "name", "this db")
    if not talks_between_nodes(db):
        return f"{name}'s nodes do not talk to each other: there is no link between them to hit"
    if proxied and not isinstance(db, RoutedPeers):
        return (f"{name}'s nodes do not dial each other through the link layer (a db whose "
                "peer addresses the harness gives can: redis-sentinel)")
    return None


def waiting_clients(ctx: NemesisContext, exclude: Iterable[int] = ()) -> list[int]:
    skip = set(exclude) | set(ctx.clients.doomed)
    return [p for p in ctx.live.waiters() if p not in skip]


def clients_of(ctx: NemesisContext, which: str) -> list[str] | None:
    """The client endpoints of a client link set now (None: nobody right now)."""
    if which == "clients":
        return [client_name(p) for p in ctx.clients.processes]
    if which == "waiters":
        found = wait_for(ctx, lambda: waiting_clients(ctx))
        return None if found is None else [client_name(p) for p in waiting_clients(ctx)]
    if which in ("holder", "waiter", "any") or which.startswith("client:"):
        return client_target(ctx, which)
    raise TargetError(f"{which!r} is not a set of client links ({', '.join(SETS)})")


def client_links(ctx: NemesisContext, clients: Iterable[str]) -> list[str]:
    links = link_layer(ctx)
    return [x for c in clients for x in links.links(src=c)]


def pairs_of(ctx: NemesisContext, which: str) -> tuple[list[str], list[tuple[str, str]]] | None:
    """(targets, endpoint pairs) of a link set, for faults made with iptables: edges of the
    cluster's graph, a client's as (client, node)."""
    nodes = topology.of(ctx)
    if which == "peers":
        return list(nodes), list(nodes.edges())
    clients = clients_of(ctx, "clients" if which == "all" else which)
    if clients is None:
        return None
    pairs = topology.cut_off(topology.of(ctx, clients), clients)
    return ([*clients, *nodes], pairs + list(nodes.edges())) if which == "all" else (clients, pairs)


def links_of(ctx: NemesisContext, which: str) -> tuple[list[str], list[str]] | None:
    """(targets, link names) of a link set, for faults on the link layer."""
    layer = link_layer(ctx)
    if which == "peers":
        peers = layer.peer_links()
        return sorted({e for x in peers for e in link_ends(x)}), peers
    clients = clients_of(ctx, "clients" if which == "all" else which)
    if clients is None:
        return None
    links = client_links(ctx, clients)
    if which == "all":
        return [*clients, *(n.name for n in ctx.nodes)], links + layer.peer_links()
    return clients, links


def summarize(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
              directions: Iterable[str] = ("up", "down")) -> dict[str, Any]:
    """What the link layer did to some links between two ``stats`` readings."""
    chunks = delayed = stalled = nbytes = 0
    added = 0.0
    worst = 0.0
    for name, now in after.items():
        was = before.get(name, {})
        for d in directions:
            a, b = now.get(d, {}), was.get(d, {})
            chunks += a.get("chunks", 0) - b.get("chunks", 0)
            nbytes += a.get("bytes", 0) - b.get("bytes", 0)
            delayed += a.get("delayed_chunks", 0) - b.get("delayed_chunks", 0)
            stalled += a.get("stalled_bytes", 0) - b.get("stalled_bytes", 0)
            added += a.get("added", 0.0) - b.get("added", 0.0)
            worst = max(worst, a.get("max_added", 0.0))
    return {"links": len(after), "chunks": chunks, "bytes": nbytes, "delayed-chunks": delayed,
            "mean-added-ms": round(1000 * added / chunks, 3) if chunks else None,
            "stalled-bytes": stalled, "max-added-ms": round(1000 * worst, 3)}
