"""Partitions as graphs: who can still reach whom.

A partition is an undirected graph over the endpoints (DB nodes and clients) whose edges are the
links that still work; every missing edge is a link to cut. Its connected components tell which
side, if any, still has a quorum of the DB nodes. For a non-transitive partition (the majorities
ring, the bridge) "components" are not the whole story: each node sees its own neighbourhood.
"""

from __future__ import annotations

import itertools
import random

import networkx as nx

KINDS = ("halves", "one", "ring", "bridge")


def complete(names: list[str]) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(names)
    g.add_edges_from(itertools.combinations(names, 2))
    return g


def halves(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Two sides of a shuffle, the first a strict majority: Jepsen's random halves for odd n
    ((n+1)//2 against n//2). For even n equal halves would leave no side a quorum (a cluster
    with no majority anywhere, another fault), so the first side is n//2 + 1 and the second
    n//2 - 1: for 4 nodes 3|1, for 6 4|2. Two nodes have no split with a majority that cuts
    anything: 1|1, neither side a quorum. One node cannot be split (ValueError)."""
    n = len(nodes)
    if n < 2:
        raise ValueError(f"halves needs at least 2 nodes to split, got {n}")
    shuffled = rng.sample(nodes, n)
    cut = 1 if n == 2 else n // 2 + 1
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for side in (shuffled[:cut], shuffled[cut:]):
        g.add_edges_from(itertools.combinations(side, 2))
    return g


def isolate(nodes: list[str], victim: str) -> nx.Graph:
    g = complete(nodes)
    g.remove_edges_from([(victim, n) for n in nodes if n != victim])
    return g


def majorities_ring(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Each node sees a majority (itself and its nearest neighbours on a ring), but no two
    nodes see the same majority."""
    ring = rng.sample(nodes, len(nodes))
    n = len(ring)
    reach = -(-(n // 2) // 2)  # neighbours on each side: itself + 2*reach >= n//2 + 1
    g = nx.Graph()
    g.add_nodes_from(ring)
    for i, a in enumerate(ring):
        for d in range(1, reach + 1):
            g.add_edge(a, ring[(i + d) % n])
    return g if 2 * reach + 1 < n else halves(nodes, rng)


def bridge(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Two halves joined by one node that sees both."""
    shuffled = rng.sample(nodes, len(nodes))
    mid = len(shuffled) // 2
    left, b, right = shuffled[:mid], shuffled[mid], shuffled[mid + 1:]
    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(itertools.combinations([*left, b], 2))
    g.add_edges_from(itertools.combinations([b, *right], 2))
    return g


def build(kind: str, nodes: list[str], rng: random.Random) -> nx.Graph:
    if kind == "halves":
        return halves(nodes, rng)
    if kind == "one":
        return isolate(nodes, rng.choice(nodes))
    if kind == "ring":
        return majorities_ring(nodes, rng)
    if kind == "bridge":
        return bridge(nodes, rng)
    raise ValueError(f"unknown partition kind {kind!r}: use one of {', '.join(KINDS)}")


def cuts(reach: nx.Graph) -> list[tuple[str, str]]:
    """The links to cut: every pair of endpoints not joined by an edge."""
    return sorted(tuple(sorted(e)) for e in nx.complement(reach).edges())  # type: ignore[misc]


def describe(reach: nx.Graph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.connected_components(reach))
