"""One test run, start to finish: spec -> cluster -> workload + nemesis -> history -> checks.

The order of things is the contract of ARCHITECTURE.md: the run directory and ``test.json``
first; nodes up and ready; clients started (each journals its own ops) and the nemesis schedule;
at the time limit the nemesis heals everything, the system quiesces, the clients stop; the
resource log is read back; the journals are merged into ``history.jsonl``; then the checkers,
``results.json``, ``report.html``. Teardown always runs, on errors and Ctrl-C too.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nemesis as nemeses
from checker.compose import check_all
from harness import dbs
from harness.backends import make as make_backend
from harness.dbs.base import Node, client_options_of, companions_of
from harness.errors import HarnessError, UsageError
from harness.history import INVOKE, OK, JournalWriter, merge_journals, write_history
from harness.live import LiveState
from harness.procs import ProcessTable
from harness.progress import Progress
from harness.report import write_report
from harness.spec import TestSpec
from harness.store import mark_active, new_run_dir, point_latest, write_json
from nemesis.base import Clients, NemesisContext, client_name
from nemesis.schedule import Schedule
from workloads import locks
from workloads.crash import crash_file
from workloads.resource import Resource

READY_TIMEOUT = 20.0
CLIENT_STOP_TIMEOUT = 10.0


@dataclass
class Outcome:
    run_dir: Path
    results: dict[str, Any]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


class Interrupted(Exception):
    pass


def journals_dir(run_dir: Path) -> Path:
    return run_dir / "journals"


def collect_history(run_dir: Path) -> list[dict[str, Any]]:
    """Merge the journals into history.jsonl (idempotent; what a crashed run recorded)."""
    history = merge_journals(journals_dir(run_dir).glob("*.jsonl"))
    write_history(run_dir / "history.jsonl", history)
    return history


def check_run(run_dir: Path, spec: dict[str, Any], history: list[dict[str, Any]]
              ) -> dict[str, Any]:
    results = check_all(history, spec)
    write_json(run_dir / "results.json", results)
    write_report(run_dir, spec, history, results)
    return results


class Run:
    def __init__(self, spec: TestSpec, progress: Progress) -> None:
        self.spec = spec
        self.progress = progress
        self.store = Path(spec.store)
        self.run_dir = new_run_dir(self.store, spec.test_name)
        self.run_id = f"{spec.test_name}/{self.run_dir.name}"
        self.procs = ProcessTable(self.run_dir)
        self.backend = make_backend(spec.backend, self.run_dir, self.procs, self.run_id)
        self.db = dbs.make(spec.db, spec.persistence)
        self.rng = random.Random(spec.seed)
        self.nodes: list[Node] = []
        self.resource_node: Node | None = None
        self.companions: list[tuple[Any, list[Node]]] = []  # e.g. Redis Sentinels
        self.client_handles: Clients | None = None
        self.schedule: Schedule | None = None
        self.clients: list[int] = list(range(spec.clients))
        self.marker: Path | None = None

    # ------------------------------------------------------------------------------------------
    def execute(self) -> Outcome:
        spec = self.spec
        write_json(self.run_dir / "test.json", {"spec": spec.to_dict(), "run_id": self.run_id,
                                                "status": "starting"})
        point_latest(self.store, self.run_dir)
        self.marker = mark_active(self.run_dir, self.run_id)
        interrupted = False
        error: HarnessError | None = None
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._setup_cluster()
            self._run_test()
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
            self.progress.line("interrupted: healing, stopping, saving what was recorded")
        except HarnessError as e:
            error = e
        finally:
            signal.signal(signal.SIGTERM, previous)
            self._teardown()
        results: dict[str, Any] = {}
        if journals_dir(self.run_dir).is_dir():
            history = collect_history(self.run_dir)
            results = check_run(self.run_dir, spec.to_dict(), history)
        self._write_test_json("interrupted" if interrupted else "error" if error else "complete",
                              str(error) if error else None)
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
        if error is not None:
            raise error
        return Outcome(self.run_dir, results, interrupted)

    # ------------------------------------------------------------------------------------------
    def _setup_cluster(self) -> None:
        spec, backend = self.spec, self.backend
        assert spec.nodes is not None
        started = time.monotonic()
        backend.prepare(self.db.port, spec.nodes, spec.clients)
        self.nodes = [Node(f"n{i + 1}", backend.node_host(i), self.db.port)
                      for i in range(spec.nodes)]
        self.resource_node = Node("resource", backend.resource_host(), self.db.port, "resource")
        needs_iptables = any(n in nemeses.NEEDS_IPTABLES for n in spec.nemesis)
        backend.preflight(self.db, [*self.nodes, self.resource_node], needs_iptables)
        self.companions = companions_of(self.db, self.nodes)
        for helper_db, helper_nodes in self.companions:
            backend.preflight(helper_db, helper_nodes, False)
        resource_db = dbs.lookup("redis")()
        backend.provision(self.db, self.nodes)
        for helper_db, helper_nodes in self.companions:
            backend.provision(helper_db, helper_nodes)
        backend.provision(resource_db, [self.resource_node])
        if any(n in nemeses.NEEDS_CLOCK for n in spec.nemesis):
            reason = self.db.clock_fault_support()
            if reason:
                raise UsageError(f"--nemesis clock: {reason}")
            for node in self.nodes:
                backend.enable_clock(node)
        for node in [*self.nodes, self.resource_node]:
            backend.start(node)
        for node in [*self.nodes, self.resource_node]:
            backend.wait_ready(node, READY_TIMEOUT)
        helpers = [n for _, ns in self.companions for n in ns]  # once the nodes they watch run
        for node in helpers:
            backend.start(node)
        for node in helpers:
            backend.wait_ready(node, READY_TIMEOUT)
        self.progress.line(f"{len(self.nodes)} {spec.db} node(s) + resource ready on "
                           f"{backend.name} in {time.monotonic() - started:.1f} s "
                           f"({self.run_dir})")

    def _client_config(self, process: int, t0: int) -> Path:
        spec = self.spec
        info = locks.lookup(spec.lock)
        assert self.resource_node is not None
        cfg = {
            "process": process,
            "t0_ns": t0,
            "seed": spec.seed,
            "source": self.backend.client_host(process),
            "networks": self.backend.client_networks(),
            "journal": str(journals_dir(self.run_dir) / f"c{process}.jsonl"),
            "lock_target": info.target,
            "lock_name": "lock",
            "ttl": spec.ttl,
            "op_timeout": 1.0,
            "nodes": [n.endpoint for n in self.nodes],
            "lock_options": client_options_of(self.db),
            "crash_file": str(crash_file(self.run_dir, process)),
            "resource": self.resource_node.endpoint,
            "workload": spec.workload,
            "end_ns": t0 + int((spec.time_limit + spec.quiesce) * 1e9),
        }
        path = self.run_dir / "clients" / f"c{process}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
        return path

    def _run_test(self) -> None:
        spec = self.spec
        journals_dir(self.run_dir).mkdir(exist_ok=True)
        t0 = time.monotonic_ns()
        for p in self.clients:
            cfg = self._client_config(p, t0)
            self.backend.register_endpoint(client_name(p), self.backend.client_host(p))
            self.procs.spawn(client_name(p), [sys.executable, "-m", "workloads.client", str(cfg)],
                             self.run_dir / "logs" / f"client-{p}.log", tie_to_controller=True)
        live = LiveState({p: journals_dir(self.run_dir) / f"c{p}.jsonl" for p in self.clients})
        nem_journal = JournalWriter(journals_dir(self.run_dir) / "nemesis.jsonl", "nemesis", t0)
        self.client_handles = Clients(self.procs, self.clients)
        ctx = NemesisContext(self.backend, self.nodes, self.client_handles, live,
                             random.Random(self.rng.random()), spec.ttl, db=self.db,
                             options=dict(spec.nemesis_options))
        self.schedule = Schedule(nemeses.build(spec.nemesis), ctx, nem_journal)
        self.schedule.start()
        deadline = time.monotonic() + spec.time_limit
        try:
            while (now := time.monotonic()) < deadline:
                time.sleep(min(0.25, deadline - now))
                live.refresh()
                self.progress.tick(time.monotonic() - (deadline - spec.time_limit),
                                   spec.time_limit, live, self.schedule.describe_active())
                dead = [p for p in self.clients if self.procs.pid(client_name(p)) is None
                        and p not in self.client_handles.doomed]  # crashed on purpose: fine
                if dead:
                    raise HarnessError(
                        f"client {dead[0]} exited early; see {self.run_dir}/logs/client-"
                        f"{dead[0]}.log")
        finally:
            self.progress.done()
            self.progress.line("healing, quiescing, stopping clients")
            self.schedule.finish()
        time.sleep(spec.quiesce)
        for p in self.clients:
            self.procs.stop(client_name(p), timeout=CLIENT_STOP_TIMEOUT)
        self._final_read(t0)

    def _final_read(self, t0: int) -> None:
        """Read the resource's own log back: the ground truth the checkers compare with."""
        assert self.resource_node is not None
        j = JournalWriter(journals_dir(self.run_dir) / "final.jsonl", len(self.clients), t0)
        resource = Resource(self.resource_node.host, self.resource_node.port, fenced=False)
        j.record(INVOKE, "read", None)
        try:
            log = resource.read_log()
        except Exception as e:
            raise HarnessError(f"could not read the resource log back: {e}") from None
        j.record(OK, "read", log)
        j.close()
        resource.close()

    def _teardown(self) -> None:
        if self.schedule is not None and not self.schedule.done.is_set():
            self.schedule.finish()
        self.backend.teardown()
        self.procs.kill_all()

    def _write_test_json(self, status: str, error: str | None) -> None:
        faults = []
        if self.schedule is not None:
            faults = [f.__dict__ for f in self.schedule.faults]
        write_json(self.run_dir / "test.json", {
            "spec": self.spec.to_dict(),
            "run_id": self.run_id,
            "status": status,
            "error": error,
            "nodes": [n.endpoint for n in self.nodes],
            "companions": [n.endpoint for _, ns in self.companions for n in ns],
            "resource": self.resource_node.endpoint if self.resource_node else None,
            "faults": faults,
            "nemesis-errors": self.schedule.errors if self.schedule else [],
        })


def _raise_interrupt(signum: int, frame: object) -> None:
    raise Interrupted()
