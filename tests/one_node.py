"""Real DB nodes brought up through a backend of the harness (the local one by default), for
tests that need a live server but not a whole run (a probe, an API, a config key, a clock).

They are marked as a run in progress, as a run marks itself: a `harness clean` from a test
running beside this one (pytest-xdist) leaves their processes, containers and rules alone."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.controller.backends.local import LocalBackend
from harness.controller.cleanup import mark_active
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.cluster import Node


@contextlib.contextmanager
def nodes_up(backend_cls: Any, db: Any, tmp_path: Path, n: int = 1
             ) -> Iterator[tuple[Any, list[Node]]]:
    """``n`` nodes of ``db`` up and answering through ``backend_cls``: (the backend, nodes)."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True, exist_ok=True)
    procs = ProcessTable(run.pids)
    run_id = f"test/{uuid.uuid4().hex[:8]}"
    marker = mark_active(run, run_id)
    backend = backend_cls(run, procs, run_id)
    try:
        backend.prepare(db.port, n, 0)
        cluster = [Node(f"n{i + 1}", backend.node_host(i), db.port) for i in range(n)]
        backend.preflight(db, cluster, False)
        backend.provision(db, cluster)
        for node in cluster:
            backend.start(node)
        for node in cluster:
            backend.wait_ready(node, 30)
        yield backend, cluster
    finally:
        backend.teardown()
        procs.kill_all()
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def one_node(db: Any, tmp_path: Path, nodes: int = 1) -> Iterator[list[Node]]:
    with nodes_up(LocalBackend, db, tmp_path, nodes) as (_, cluster):
        yield cluster


def lease_contract(a: Any, b: Any, first_wait: float, took_over: tuple[float, float]) -> None:
    """A heartbeated lease with tokens, of two clients ``a`` and ``b`` of one store, TTL 1 s:
    a held lock keeps ``b`` out past its lease, a released one is taken at once, a silent
    holder (its heartbeats stopped, as in a pause) is taken over within ``took_over`` seconds
    and finds its release refused; each grant's token one above the last."""
    first = a.acquire(first_wait)
    assert first is not None and first.token == 1
    began = time.monotonic()
    assert b.acquire(2.5) is None, "a heartbeating holder keeps the lock past its lease"
    assert time.monotonic() - began >= 2.5
    assert a.release(first)
    second = b.acquire(2.0)
    assert second is not None and second.token == 2, "a released lock is taken at once"
    second.handle.stop.set()  # b falls silent: its heartbeats stop, as in a pause
    began = time.monotonic()
    third = a.acquire(5.0)
    waited = time.monotonic() - began
    assert third is not None and third.token == 3
    assert took_over[0] <= waited < took_over[1], f"taken over after {waited:.2f} s"
    assert not b.release(second), "the silent holder's release finds the lock taken"
    assert a.release(third)
