"""Partitions as graphs: every kind leaves the quorum where it should be."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis import topology

NODES = [f"n{i}" for i in range(1, 6)]


@given(st.integers(3, 9), st.integers(0, 2**32 - 1))
def test_halves_leave_exactly_one_majority(n: int, seed: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    reach = topology.halves(nodes, random.Random(seed))
    assert len(topology.quorum_sides(reach, nodes)) == (1 if n % 2 else 0) or n % 2 == 0
    assert nx.number_connected_components(reach) == 2


def test_isolating_one_node_keeps_the_majority_together() -> None:
    reach = topology.isolate(NODES, "n3")
    sides = topology.quorum_sides(reach, NODES)
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
