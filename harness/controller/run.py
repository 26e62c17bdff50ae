"""One test run, start to finish, as nested scopes: each part is torn down by the scope that
made it, so the order of teardown is the structure of the code.

    run directory, test.json, marked active          (store, cleanup)
    └─ cluster: link layer (if the run needs it), nodes + companions + resource up
                                                     (torn down: servers and proxy stopped,
                                                      rules gone)
       └─ clients: one process each, journaling      (torn down: clients stopped)
          └─ faults: the schedule on its thread      (torn down: every fault healed)
             └─ the load, for the time limit
          quiesce
       the resource's log read back (the ground truth)
    journals merged into history.jsonl, checkers, results.json

Teardown runs on errors and on SIGINT / SIGTERM too; what was recorded is checked either way.
The report is written by the caller (presentation sits above the controller).
"""

from __future__ import annotations

import contextlib
import random
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.controller import checking, cleanup
from harness.controller.backends import Backend
from harness.controller.backends import make as make_backend
from harness.controller.backends.process_nodes import last_lines
from harness.controller.clients import Clients
from harness.controller.faults import FaultRunner, generate
from harness.controller.links import Links
from harness.controller.live import LiveState
from harness.controller.procs import ProcessTable
from harness.controller.progress import Progress
from harness.controller.registry import Registry, check_environment, default_registry, requires
from harness.controller.resolved import make_db
from harness.controller.spec import TestSpec, nemesis_name, nemesis_target
from harness.controller.store import RunDir, Store
from harness.core import capabilities, defaults
from harness.core.client_config import ClientConfig
from harness.core.client_config import node as endpoint_node
from harness.core.cluster import NemesisContext, Node, client_name
from harness.core.errors import HarnessError, UsageError
from harness.core.heap import collector_paused
from harness.core.history import INFO, INVOKE, OK, STOP_CLIENTS, Op
from harness.core.journal import JournalWriter

READY_TIMEOUT = 20.0
START_GATE = 3.0  # seconds a db that starts its members in turn may hold the next one back
SOURCE_SAMPLES = 3  # the DB's client list is read this many times, once every client ran
SOURCE_SAMPLE_GAP = 0.1  # seconds between two reads
SOURCE_SETTLE = 0.3  # seconds after every client invoked an op before the reads begin


@dataclass
class Outcome:
    run: RunDir
    results: dict[str, Any]
    status: str  # complete | interrupted | error
    error: str | None = None
    error_code: int = 3  # the exit code the error calls for (64: a usage problem found late)
    history: Sequence[Op] = field(default_factory=list)  # as merged into history.jsonl
    # (checked): its client ops in columns when they fit (harness.controller.store.RunDir.merged)

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"

    def save_history(self) -> None:
        """history.jsonl of a checked run (``execute(save_history=False)`` left it)."""
        if self.results:
            self.run.save_history(self.history)
            self.run.seal()


class Interrupted(Exception):
    pass


def nemesis_crashed(faults: FaultRunner) -> None:
    """A nemesis thread that stopped on an exception ends the run: exit 3, one line."""
    if faults.crashed is not None:
        raise HarnessError(f"the nemesis thread stopped: {faults.crashed} (the faults did "
                           "not run as scheduled: no verdict)")


@dataclass
class Cluster:
    """The DB nodes, their companions (Sentinels) and the protected resource (a node of its
    own, or node 1 itself for a lock that writes in its own transaction)."""

    backend: Backend
    db: Any
    nodes: list[Node] = field(default_factory=list)
    companions: list[tuple[Any, list[Node]]] = field(default_factory=list)
    resource: Node | None = None
    resource_db: Any = None  # None: the resource lives in node 1's database

    @property
    def separate_resource(self) -> list[Node]:
        """The resource's own node, if it has one."""
        return [self.resource] if self.resource is not None and self.resource_db else []
    links: Links | None = None  # the link layer, when the run has one

    def endpoints(self) -> dict[str, Any]:
        out = {"nodes": [n.endpoint for n in self.nodes],
               "companions": [n.endpoint for _, ns in self.companions for n in ns],
               "resource": self.resource.endpoint if self.resource else None}
        if self.links is not None:
            out["links"] = self.links.record()
        return out


class Run:
    def __init__(self, spec: TestSpec, progress: Progress, *, store: Store | None = None,
                 run: RunDir | None = None, registry: Registry | None = None) -> None:
        self.spec = spec
        self.progress = progress
        self.registry = registry or default_registry()
        self.store = store or Store(spec.store)
        self.run = run or self.store.create(spec.test_name)
        self.run_id = f"{spec.test_name}/{self.run.name}"
        self.procs = ProcessTable(self.run.pids)
        self.rng = random.Random(spec.seed)
        self.test = spec.resolved(self.registry)  # the roles, checked once: no name looked up
        self.db = self.test.make_db()
        self.cluster: Cluster | None = None
        self.faults: FaultRunner | None = None
        self.sources: dict[str, Any] | None = None
        self.clock = 0.0  # when the phase being timed began (progress lines)

    # ------------------------------------------------------------------------------------------
    def execute(self, *, save_history: bool = True) -> Outcome:
        """The run, start to finish. Not ``save_history``: the merged history is checked but
        history.jsonl is left for the caller to write (:meth:`Outcome.save_history`: after it
        printed the verdict); the journals it was merged from stay either way."""
        spec = self.spec
        self.run.begin({"spec": spec.to_dict(), "run_id": self.run_id, "status": "starting",
                        "plugins": self.test.plugins()})
        status, error, failure = "complete", None, None
        with contextlib.ExitStack() as stack:
            marker = cleanup.mark_active(self.run, self.run_id)
            stack.callback(marker.unlink, missing_ok=True)
            stack.enter_context(_signals_interrupt())
            try:
                self._scopes()
            except Interrupted:
                status = "interrupted"
                self.progress.line("interrupted: healing, stopping, saving what was recorded")
            except HarnessError as e:
                status, error, failure = "error", str(e), e
        results: dict[str, Any] = {}
        history: Sequence[Op] = []  # (the merge's ColumnHistory kept as it is, not copied)
        if self.run.has_journals():
            started = time.monotonic()
            with collector_paused():  # ops by the hundred thousand, no cycles among them
                history = self.run.merged()
                try:
                    results = checking.check_run(self.run, spec.to_dict(), history,
                                                 status=status, checks=self.test.checkers,
                                                 error=error)
                finally:  # a history the checkers refused is kept too
                    if save_history or not results:
                        self.run.save_history(history)
                        self.run.seal()  # what it wrote, for `harness check RUN` to verify
            self.progress.line(f"{len(history):,} ops merged and checked in "
                               f"{time.monotonic() - started:.1f} s")
        self._save_test(status, error)
        if failure is not None and not results:
            raise failure
        return Outcome(self.run, results, status, error,
                       failure.exit_code if failure is not None else 3, history)

    def _scopes(self) -> None:
        with self._cluster() as cluster:
            self.store.point_latest(self.run)  # only a run that started becomes "latest"
            t0 = time.monotonic_ns()
            with self._clients(cluster, t0) as (clients, live):
                self._check_sources(cluster, clients, live)
                with self._faults(cluster, clients, live, t0) as faults:
                    self._load(clients, live, faults, t0)
                nemesis_crashed(faults)
                if faults.faults:  # nothing to recover from when no fault was injected
                    self._quiesce(live)
                self.progress.line(f"healed and quiesced in {time.monotonic() - self.clock:.1f}"
                                   " s")
                self.clock = time.monotonic()
            self.progress.line(f"clients stopped in {time.monotonic() - self.clock:.1f} s")
            self.clock = time.monotonic()
            self._final_read(cluster, t0)
            self.progress.line(f"resource read back in {time.monotonic() - self.clock:.1f} s")
            self.clock = time.monotonic()
        self.progress.line(f"servers stopped in {time.monotonic() - self.clock:.1f} s")

    # scopes -----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _cluster(self) -> Iterator[Cluster]:
        spec, run, test = self.spec, self.run, self.test
        assert spec.nodes is not None
        started = time.monotonic()
        backend = make_backend(spec.backend, run, self.procs, self.run_id, hosts=spec.hosts,
                               say=self.progress.line)
        try:
            for name in test.nemeses:  # the roles were checked; where they run is asked now
                check_environment(name, test.requires(name), backend.environment_unmet)
            unavailable = getattr(test.lock.cls, "unavailable", None)
            if callable(unavailable) and (reason := unavailable()) is not None:
                raise HarnessError(f"lock {spec.lock!r}: {reason}")
            resource_db = None if test.resource_db is None else make_db(test.resource_db)
            for db in (self.db, resource_db or self.db):  # before anything starts
                if (why := db.refused_backends.get(backend.name)) is not None:
                    raise HarnessError(f"--backend {backend.name} cannot run --db {db.name}: "
                                       f"{why}")
                backend.mount_host_dirs(db)
            names = [f"n{i + 1}" for i in range(spec.nodes)]
            if any(capabilities.PowerLoss in test.requires(n) for n in test.nemeses):
                backend.enable_power_loss(names)  # before prepare: containers need FUSE
            backend.prepare(self.db.port, spec.nodes, spec.clients,
                            resource_port=(resource_db or self.db).port)
            cluster = self.cluster = Cluster(backend, self.db, resource_db=resource_db)
            cluster.nodes = [Node(name, backend.node_host(i), self.db.port)
                             for i, name in enumerate(names)]
            cluster.resource = cluster.nodes[0] if resource_db is None else Node(
                "resource", backend.resource_host(), resource_db.port)
            links, peers = self._link_plan(backend)
            needs_iptables = peers or any(capabilities.Iptables in test.requires(n)
                                          for n in test.nemeses)
            backend.preflight(self.db, cluster.nodes, needs_iptables)
            if resource_db is not None:
                backend.preflight(resource_db, cluster.separate_resource, needs_iptables)
            if links:
                cluster.links = Links(run, self.procs, int(spec.seed or 0))
            if peers:
                assert cluster.links is not None
                backend.enable_doors()
                self.db.route_peers(cluster.links.route_doors(
                    cluster.nodes, self.db.peer_ports(), backend.door_host))
            self.db.configure_for({c for n in test.nemeses for c in test.requires(n)})
            if isinstance(self.db, capabilities.HasCompanions):
                cluster.companions = list(self.db.companions(cluster.nodes))
            if cluster.links is not None:
                cluster.links.route_clients(
                    {p: backend.client_host(p) for p in range(spec.clients)},
                    [*cluster.nodes, *(n for _, ns in cluster.companions for n in ns)],
                    lambda n: backend.door_host(n.host) or "127.0.0.1")
                cluster.links.start()
            for helper_db, helper_nodes in cluster.companions:
                backend.preflight(helper_db, helper_nodes, False)
            backend.provision(self.db, cluster.nodes)
            for helper_db, helper_nodes in cluster.companions:
                backend.provision(helper_db, helper_nodes)
            if resource_db is not None:
                backend.provision(resource_db, cluster.separate_resource)
            clock_ids = {getattr(n.cls, "clock_id", lambda _: "wall")(spec.nemesis_options)
                         for n in test.nemeses.values()
                         if capabilities.ClockFaults in requires(n.cls)}
            if clock_ids and capabilities.clock_mechanism(self.db) == "libfaketime":
                for node in cluster.nodes:  # one mode per run: the clock-id option is one
                    backend.enable_clock(node, "both" if clock_ids - {"wall"} else "wall")
            everything = [*cluster.nodes, *cluster.separate_resource]
            for node in everything:
                backend.start(node)
                if node in cluster.nodes:
                    self._await_started(node)
            for node in everything:
                backend.wait_ready(node, READY_TIMEOUT)
            helpers = [n for _, ns in cluster.companions for n in ns]  # once their nodes run
            for node in helpers:
                backend.start(node)
            for node in helpers:
                backend.wait_ready(node, READY_TIMEOUT)
            self._setup_resource(cluster)
            self.progress.line(f"{len(cluster.nodes)} {spec.db} node(s) + resource ready on "
                               f"{backend.name} in {time.monotonic() - started:.1f} s "
                               f"({run.path})")
            yield cluster
        finally:
            if self.cluster is not None and self.cluster.links is not None:
                self.cluster.links.stop()
            backend.teardown()
            self.procs.kill_all()

    def _link_plan(self, backend: Backend) -> tuple[bool, bool]:
        """(the run has a link layer, the links between its nodes go through it)."""
        needs = [c for n in self.test.nemeses for c in self.test.requires(n)]
        proxy = self.spec.links == "proxy"
        peers = capabilities.PeerLinks in needs or (
            proxy and isinstance(self.db, capabilities.RoutedPeers)
            and backend.environment_unmet(capabilities.PeerLinks) is None)
        return proxy or peers or capabilities.LinkLayer in needs, peers

    @contextlib.contextmanager
    def _clients(self, cluster: Cluster, t0: int) -> Iterator[tuple[Clients, LiveState]]:
        spec = self.spec
        self.run.journals.mkdir(exist_ok=True)
        clients = Clients(self.procs, self.run, list(range(spec.clients)))
        try:
            for p in clients.processes:
                cluster.backend.register_endpoint(client_name(p), cluster.backend.client_host(p))
                clients.spawn(p, self._client_config(cluster, p, t0),
                              group=cluster.backend.client_group(p))
            # Read as they grow only when a fault may ask who holds the lock now: the
            # journals of a run without faults are left to their clients until the end.
            live = LiveState({p: self.run.journal(p) for p in clients.processes},
                             follow=bool(self.test.nemeses), t0_ns=t0)
            yield clients, live
        finally:
            killed = clients.stop_all()
            # The end of the load, in the history: who had to be killed in the middle of a
            # call (its demand pending to here), for liveness to judge or say it cannot.
            end = JournalWriter(self.run.journal("nemesis"), "nemesis", t0)
            end.record(INFO, STOP_CLIENTS, "end", detail={"killed": killed})
            end.close()

    @contextlib.contextmanager
    def _faults(self, cluster: Cluster, clients: Clients, live: LiveState, t0: int
                ) -> Iterator[FaultRunner]:
        spec = self.spec
        journal = JournalWriter(self.run.journal("nemesis"), "nemesis", t0)
        ctx = NemesisContext(cluster.backend, cluster.nodes, clients, live,
                             random.Random(self.rng.random()), spec.ttl, db=self.db,
                             options=dict(spec.nemesis_options), links=cluster.links,
                             # the lock's wait for a reply
                             op_timeout=float(spec.request_timeout or spec.op_timeout
                                              or defaults.OP_TIMEOUT))
        nemeses = {name: role.cls() for name, role in self.test.nemeses.items()}
        targets = {nemesis_name(item): nemesis_target(item) for item in spec.nemesis}
        if spec.schedule is not None:  # a replay, or an example of harness explore
            schedule = spec.fault_schedule()
        else:
            schedule = generate(list(targets), nemeses, ctx, spec.time_limit,
                                random.Random(self.rng.random()), targets)
        self.faults = runner = FaultRunner(nemeses, schedule, ctx, journal, t0=t0 / 1e9)
        try:
            runner.start()
            yield runner
        finally:
            self.progress.done()
            self.clock = time.monotonic()  # the load's end
            self.progress.line("healing, quiescing, stopping clients")
            runner.finish()
            journal.close()

    # the parts --------------------------------------------------------------------------------
    def _check_sources(self, cluster: Cluster, clients: Clients, live: LiveState) -> None:
        """Do the clients' connections come from their own addresses? Asked of the DB (where
        it can list its connections) once every client has completed an op, or invoked one
        :data:`SOURCE_SETTLE` s ago; a fault that cuts clients' links would cut nothing
        otherwise, so such faults are refused, in one line."""
        if not isinstance(self.db, capabilities.Connections):
            return
        deadline = time.monotonic() + min(5.0, self.spec.time_limit / 3)
        running_since: float | None = None  # every client had invoked an op
        while time.monotonic() < deadline and not live.all_started(clients.processes):
            # a client blocked in its first acquire is connected, asking: waiting for it to
            # complete (up to 4 s of 1 s holds among 5 clients) only made the first fault
            # start late (seen: a cut planned at 2 s struck at 4.7 s)
            if running_since is None and live.running(clients.alive()):
                running_since = time.monotonic()
            if running_since is not None and time.monotonic() - running_since >= SOURCE_SETTLE:
                break
            time.sleep(0.05)
        backend = cluster.backend
        allowed = {backend.client_host(p) for p in clients.processes}
        allowed |= {n.host for n in cluster.nodes} | {
            n.host for _, ns in cluster.companions for n in ns}
        if cluster.links is not None:  # a replica's link to its primary, through its door
            allowed |= set(cluster.links.door_hosts.values())
        seen: dict[str, list[str]] = {}
        for sample in range(SOURCE_SAMPLES):  # a lock may hold a connection only while it asks
            if sample:
                time.sleep(SOURCE_SAMPLE_GAP)
            for node in cluster.nodes:
                found = self.db.connected_from(node)
                if found is not None:
                    seen[node.name] = sorted(set(found) | set(seen.get(node.name, ())))
        foreign = sorted({a for addrs in seen.values() for a in addrs} - allowed)
        self.sources = {"seen": seen, "foreign": foreign}
        if not foreign:
            return
        cutters = [n for n, role in self.test.nemeses.items()
                   if getattr(role.cls, "cuts_clients", False)]
        what = (f"clients of {self.spec.lock} connect to the DB from {', '.join(foreign)}, not "
                f"from their own addresses ({min(allowed)} ...): the lock's connections "
                "ignore the client's source address")
        if cutters:
            raise UsageError(f"--nemesis {cutters[0]} would cut nothing: {what}. Leave out "
                             "the faults that cut clients, or give the lock an option to "
                             "bind its source address")
        self.progress.line(f"note: {what}; faults that cut clients would not bite")

    def _client_config(self, cluster: Cluster, process: int, t0: int) -> ClientConfig:
        spec, test, backend = self.spec, self.test, cluster.backend
        assert cluster.resource is not None and spec.resource_mode is not None
        options: dict[str, Any] = dict(self.db.client_options()) if isinstance(
            self.db, capabilities.HasCompanions) else {}
        options.update(test.lock.entry.options)  # exec:PATH: where the program is
        nodes = [n.endpoint for n in cluster.nodes]
        redirects: dict[str, str] = {}
        if cluster.links is not None:  # the lock reaches its nodes through its own links
            nodes = [cluster.links.client_endpoint(process, n) for n in nodes]
            options = cluster.links.client_options(process, options)
            redirects = cluster.links.redirects(process)
        declared = getattr(test.lock.cls, "options", None) or {}  # every one, None included
        return ClientConfig(
            process=process, t0_ns=t0, end_ns=t0 + int((spec.time_limit + spec.quiesce) * 1e9),
            seed=int(spec.seed or 0), source=backend.client_host(process),
            networks=backend.client_networks(), redirects=redirects,
            journal=str(self.run.journal(process)), crash_file=str(self.run.crash_file(process)),
            clock_file=str(self.run.clock_file(process)),
            lock_target=test.lock.target, lock_name=lock_name(process, spec.keys),
            lock_options={**{k: o.default for k, o in declared.items()}, **spec.lock_options},
            harness_options=options,  # the lock's config.harness, beside seed and source
            ttl=spec.ttl, op_timeout=float(spec.op_timeout or defaults.OP_TIMEOUT),
            nodes=tuple(map(endpoint_node, nodes)), workload_target=test.workload.target,
            workload_options=spec.workload_options(), resource=cluster.resource,
            resource_target=test.resource.target, resource_mode=spec.resource_mode,
            faults=bool(test.nemeses))

    def _await_started(self, node: Node) -> None:
        """A db that starts its members one after another (``started(node)``: may the next
        one start?) is waited for, ``START_GATE`` seconds at most: past that the next member
        starts anyway and readiness decides."""
        deadline = time.monotonic() + START_GATE
        while time.monotonic() < deadline and not self.db.started(node):
            time.sleep(0.02)

    def _quiesce(self, live: LiveState) -> None:
        """After the heal: wait until every op in flight at the heal has completed (each of
        those clients has heard back), for ``quiesce`` seconds at most, so that ops cut off by
        a fault can still complete. Ops invoked after the heal are the load going on, not
        waited for (a busy load always has one in flight: it held every run for the whole
        ``quiesce``). (The clients then finish the op they are in when told to stop; an
        acquire never waits past the end of the load plus ``quiesce``.)"""
        live.settle(self.spec.quiesce)

    def _load(self, clients: Clients, live: LiveState, faults: FaultRunner, t0: int) -> None:
        """The time limit, from the clients' start, with progress; a client that dies on its
        own ends the run."""
        limit = self.spec.time_limit
        deadline = t0 / 1e9 + limit
        checking.preload()  # what the checks import, while the controller only waits
        while (now := time.monotonic()) < deadline:
            time.sleep(min(0.25, deadline - now))
            if live.follow or self.progress.due():
                live.refresh()
            self.progress.tick(time.monotonic() - (deadline - limit), limit, live,
                               faults.describe_active())
            nemesis_crashed(faults)
            dead = clients.dead()
            if dead:
                log = self.run.client_log(dead[0])
                raise HarnessError(f"client {dead[0]} exited early: {last_lines(log, 1)} "
                                   f"(log: {log})")

    def _open_resource(self, cluster: Cluster) -> Any:
        assert cluster.resource is not None
        return self.test.resource.cls(cluster.resource.host, cluster.resource.port,
                                      mode=self.spec.resource_mode)

    def _setup_resource(self, cluster: Cluster) -> None:
        """The resource's tables (or nothing, for Redis), once, before any client."""
        resource = self._open_resource(cluster)
        try:
            resource.setup()
        except Exception as e:
            raise HarnessError(f"could not set the protected resource up on "
                               f"{cluster.resource.name if cluster.resource else '?'}: "
                               f"{type(e).__name__}: {e}") from None
        finally:
            resource.close()

    def _final_read(self, cluster: Cluster, t0: int) -> None:
        """Read the resource's own log, then its state, back: the ground truth the checkers
        compare with."""
        j = JournalWriter(self.run.journal("final"), self.spec.clients, t0)
        resource = self._open_resource(cluster)
        try:
            j.record(INVOKE, "read", None)
            try:
                log = resource.read_log()
            except Exception as e:
                raise HarnessError(f"could not read the resource log back: {e}") from None
            j.record(OK, "read", log)
            j.record(INVOKE, "read", None)
            try:
                state = resource.read_state()
            except Exception as e:
                raise HarnessError(f"could not read the resource's state back: {e}") from None
            j.record(OK, "read", {"state": state})
        finally:
            j.close()
            resource.close()

    def _save_test(self, status: str, error: str | None) -> None:
        data = self.run.load_test()
        data.update({"status": status, "error": error})
        if self.cluster is not None:
            data.update(self.cluster.endpoints())
        if self.faults is not None:
            data.update(self.faults.record())
        if self.sources is not None:
            data["client-connections"] = self.sources
        self.run.save_test(data)


def lock_name(process: int, keys: int) -> str:
    """The lock (key) client ``process`` works on: ``lock`` with one key, else ``lock-k``."""
    return "lock" if keys == 1 else f"lock-{process % keys}"


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGINT stop the run the same way (heal, stop, save), whatever the parent
    shell did with SIGINT (a background job starts with it ignored)."""
    fired = False

    def handler(signum: int, frame: object) -> None:
        nonlocal fired
        if not fired:  # a second signal must not cut the teardown the first one started
            fired = True
            raise Interrupted()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
