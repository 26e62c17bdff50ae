"""One real DB node brought up through the harness's own local backend, for tests that need a
live server but not a whole run (a probe, an API, a config key)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.controller.backends.local import LocalBackend
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.cluster import Node


@contextlib.contextmanager
def one_node(db: Any, tmp_path: Path, nodes: int = 1) -> Iterator[list[Node]]:
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True, exist_ok=True)
    procs = ProcessTable(run.pids)
    backend = LocalBackend(run, procs, f"test/{uuid.uuid4().hex[:8]}")
    try:
        backend.prepare(db.port, nodes, 0)
        cluster = [Node(f"n{i + 1}", backend.node_host(i), db.port) for i in range(nodes)]
        backend.preflight(db, cluster, False)
        backend.provision(db, cluster)
        for node in cluster:
            backend.start(node)
        for node in cluster:
            backend.wait_ready(node, 30)
        yield cluster
    finally:
        backend.teardown()
        procs.kill_all()
