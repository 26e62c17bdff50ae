"""The cluster's topology as one graph: who can reach whom.

:func:`of` is the whole: the DB nodes, each linked to every other, and clients, each linked to
every node. A partition is a graph over the same endpoints whose edges are the links that still
work (its shape: :func:`build`), every missing edge a link to cut (:func:`cuts`); its connected
components tell which side, if any, still has a quorum of the DB nodes. For a non-transitive
partition (the majorities ring, the bridge) "components" are not the whole story: each node
sees its own neighbourhood. A side cut off (a holder, a minority, the leader's side) loses its
edge boundary (:func:`cut_off`): the links iptables cuts, one direction of each for a one-way cut.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import networkx as nx

from harness.core.cluster import NemesisContext


def joined(names: Iterable[str], *sides: Iterable[str]) -> nx.Graph:
    """The graph over ``names`` in which the endpoints of each side reach each other."""
    g = nx.Graph()
    g.add_nodes_from(names)
    for side in sides:
        g.add_edges_from(itertools.combinations(side, 2))
    return g


def of(ctx: NemesisContext, clients: Iterable[str] = ()) -> nx.Graph:
    """The cluster now: every DB node linked to every other and to each of ``clients``."""
    nodes = [n.name for n in ctx.nodes]
    return joined(nodes, nodes, *([c, n] for c in clients for n in nodes))


def cut_off(g: nx.Graph, side: list[str]) -> list[tuple[str, str]]:
    """The edge boundary of ``side`` as (its end, the other), in the order of ``side`` and of
    each end's neighbours (``nx.edge_boundary``'s is a set's, other in each process)."""
    return [(a, b) for a in side for b in g[a] if b not in side]


def quorum(g: nx.Graph) -> int:
    """How many of the DB nodes of ``g`` a side needs to hold a strict majority of them."""
    return len(g) // 2 + 1


SIDES = {"majority": quorum, "minority": lambda g: max(1, len(g) - quorum(g)),
         "one": lambda g: 1, "all": len}


def side(g: nx.Graph, role: str, rng: random.Random) -> list[str]:
    """A random side of the DB nodes of ``g``: a ``majority`` (a quorum), a ``minority`` (what
    a quorum leaves out: the largest side that has none; of one node or two, one), ``one`` or
    ``all`` (in a random draw all the same: the draws after it stay those of old runs)."""
    return sorted(rng.sample(list(g), SIDES[role](g)))


def roles(components: list[list[str]]) -> list[str]:
    """Each side of a partition named by what it holds of the DB nodes (all of them in its
    ``components``): the ``majority`` (a quorum) or a ``minority`` (no side of two halves)."""
    need = quorum(joined([n for c in components for n in c], *components))
    return ["majority" if len(c) >= need else "minority" for c in components]


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
    return joined(nodes, shuffled[:cut], shuffled[cut:])


def isolate(nodes: list[str], victim: str) -> nx.Graph:
    return joined(nodes, [n for n in nodes if n != victim])


def majorities_ring(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Each node sees a majority (itself and its nearest neighbours on a ring), but no two
    nodes see the same majority."""
    ring = rng.sample(nodes, len(nodes))
    n = len(ring)
    reach = -(-(n // 2) // 2)  # neighbours on each side: itself + 2*reach >= n//2 + 1
    if 2 * reach + 1 >= n:
        return halves(nodes, rng)
    return joined(ring, *([a, ring[(i + d) % n]] for i, a in enumerate(ring)
                          for d in range(1, reach + 1)))


def bridge(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Two halves joined by one node that sees both."""
    shuffled = rng.sample(nodes, len(nodes))
    mid = len(shuffled) // 2
    return joined(nodes, shuffled[:mid + 1], shuffled[mid:])


SHAPES = {"halves": halves, "one": lambda nodes, rng: isolate(nodes, rng.choice(nodes)),
          "ring": majorities_ring, "bridge": bridge}
KINDS = tuple(SHAPES)


def build(kind: str, nodes: list[str], rng: random.Random) -> nx.Graph:
    if kind not in SHAPES:
        raise ValueError(f"unknown partition kind {kind!r}: use one of {', '.join(KINDS)}")
    return SHAPES[kind](nodes, rng)


def cuts(reach: nx.Graph) -> list[tuple[str, str]]:
    """The links to cut: every pair of endpoints not joined by an edge."""
    return sorted(tuple(sorted(e)) for e in nx.complement(reach).edges())  # type: ignore[misc]


def describe(reach: nx.Graph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.connected_components(reach))
