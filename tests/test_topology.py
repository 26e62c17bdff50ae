"""Partitions as graphs: every kind leaves the quorum where it should be."""

from __future__ import annotations

import random
from types import SimpleNamespace

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis import topology

NODES = [f"n{i}" for i in range(1, 6)]


def quorum_sides(reach: nx.Graph, db_nodes: list[str]) -> list[set[str]]:
    """The oracle: connected components holding a strict majority of the DB nodes."""
    need = len(db_nodes) // 2 + 1
    return [c for c in nx.connected_components(reach) if len(c & set(db_nodes)) >= need]


# (n, size of the first side, size of the second, sides with a quorum): a strict majority is
# more than half the nodes; for even n the first side takes one node from the second
HALVES = [(2, 1, 1, 0), (3, 2, 1, 1), (4, 3, 1, 1), (5, 3, 2, 1), (6, 4, 2, 1), (7, 4, 3, 1),
          (8, 5, 3, 1), (9, 5, 4, 1)]


@pytest.mark.parametrize(("n", "big", "small", "quorums"), HALVES)
@given(seed=st.integers(0, 2**32 - 1))

def test_halves_have_the_exact_sides(n: int, big: int, small: int, quorums: int,
                                     seed: int) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    reach = topology.halves(nodes, random.Random(seed))
    sides = sorted(nx.connected_components(reach), key=len, reverse=True)
    assert [len(s) for s in sides] == [big, small]
    assert set().union(*sides) == set(nodes)
    for side in sides:  # every link inside a side works, every link across is cut
        assert reach.subgraph(side).number_of_edges() == len(side) * (len(side) - 1) // 2
    assert len(topology.cuts(reach)) == big * small
    assert len(quorum_sides(reach, nodes)) == quorums
    if quorums:
        assert quorum_sides(reach, nodes) == [sides[0]]


def test_one_node_cannot_be_halved() -> None:
    with pytest.raises(ValueError, match="at least 2 nodes"):
        topology.halves(["n1"], random.Random(0))


def test_isolating_one_node_keeps_the_majority_together() -> None:
    reach = topology.isolate(NODES, "n3")
    sides = quorum_sides(reach, NODES)
    assert sides == [{"n1", "n2", "n4", "n5"}]
    assert ("n1", "n3") in topology.cuts(reach)


@given(st.integers(0, 2**32 - 1))
def test_majorities_ring_gives_every_node_a_different_majority(seed: int) -> None:
    reach = topology.majorities_ring(NODES, random.Random(seed))
    views = {frozenset([n, *reach.neighbors(n)]) for n in NODES}
    assert all(len(v) >= 3 for v in views)
    assert len(views) == len(NODES)
    assert nx.is_connected(reach)  # not transitive: connected, yet no shared majority


def test_bridge_node_sees_both_sides() -> None:
    reach = topology.bridge(NODES, random.Random(1))
    degrees = dict(reach.degree())
    bridge = max(degrees, key=degrees.__getitem__)
    assert degrees[bridge] == len(NODES) - 1
    assert nx.number_connected_components(reach.subgraph(set(NODES) - {bridge})) == 2


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown partition kind"):
        topology.build("triangle", NODES, random.Random(0))


@given(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True))
def test_a_side_cut_off_loses_its_links_in_the_order_of_the_side_and_the_cluster(
        side: list[str]) -> None:
    """The cluster's graph: each node linked to every other and to each client; the links a
    side loses run from it, in a fixed order (a set's would differ from run to run)."""
    ctx = SimpleNamespace(nodes=[SimpleNamespace(name=n) for n in NODES])
    g = topology.of(ctx, ["c0", "c1"])  # type: ignore[arg-type]
    assert g.number_of_edges() == 10 + 2 * 5 and not g.has_edge("c0", "c1")
    rest = [n for n in [*NODES, "c0", "c1"] if n not in side]
    assert topology.cut_off(g, side) == [(a, b) for a in side for b in rest]
    assert topology.cut_off(g, ["c1"]) == [("c1", n) for n in NODES]


@pytest.mark.parametrize("n", range(1, 9))
@given(seed=st.integers(0, 2**32 - 1))
def test_a_majority_is_a_quorum_and_a_minority_what_one_leaves_out(n: int, seed: int) -> None:
    """The node targets ``majority`` / ``minority`` as sides of the cluster's graph: a majority
    split off keeps the quorum, a minority is no quorum (but of one node), and each is the
    draw old runs made (``rng.sample`` of its size): a seed replays the same nodes."""
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = topology.joined(nodes, nodes)
    major = topology.side(g, "majority", random.Random(seed))
    minor = topology.side(g, "minority", random.Random(seed))
    assert major == sorted(random.Random(seed).sample(nodes, n // 2 + 1))
    assert minor == sorted(random.Random(seed).sample(nodes, max(1, (n - 1) // 2)))
    split = topology.joined(nodes, major, [x for x in nodes if x not in major])
    assert quorum_sides(split, nodes) == [set(major)]
    cut = topology.joined(nodes, minor, [x for x in nodes if x not in minor])
    assert (set(minor) in quorum_sides(cut, nodes)) == (n == 1)
    assert topology.side(g, "all", random.Random(seed)) == nodes
