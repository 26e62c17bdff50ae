"""The ssh backend: DB nodes on real machines (or VMs, or `harness hosts up` containers),
driven only over SSH, with the clients on the control host.

``--backend ssh --hosts HOSTS.toml`` (:mod:`.hosts`): DB node ``n<i>`` runs on the i-th host,
on the host's address; the protected resource on the ``[resource]`` host, or on the control
host (the local backend's loopback slot) when there is none; companions (Redis Sentinels) on
their node's host.

Every node operation is a command over SSH: OpenSSH's client with one multiplexed connection
per host (why: :mod:`.transport`) runs a small shell script (``ssh_host.sh``) that
starts a server in the foreground of a session of its own (``nohup setsid``) with its pid and
start time recorded on the host, signals it only while that pid is still the same process
(stop, kill, pause, resume), writes libfaketime's offset file, and adds or removes iptables
rules in the chain ``LOCK-HARNESS`` with the run's comment. Servers (and iptables,
libfaketime) missing on a host are installed with apt first, saying so.

- A run claims each host (``<dir>/claim``) and leaves a marker (``<dir>/runs/<run>/run.json``:
  run id, control machine, controller pid), so two runs never share a host and teardown,
  ``harness clean --hosts`` remove exactly what the run made: its servers, rules and files
  (packages installed with apt stay: they are the hosts' software, not the run's state).
- Logs are fetched back into the run directory (``logs/<node>.log``) at teardown, and when a
  server fails to start.
- Clients bind their own source addresses when HOSTS.toml gives ``[clients]`` addresses (on
  `harness hosts up` hosts: addresses on the network's bridge, as the docker backend does), so a
  partition can cut one client; without them all clients share the control host's address and
  a fault that cuts a client refuses, saying why.
- Clocks: a server runs under libfaketime with ``FAKETIME_TIMESTAMP_FILE`` on the host; the
  clock nemesis verifies every jump with the DB's own clock probe, as on the other backends.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import posixpath
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from dbs.faketime import check_clock, faketime_env
from harness.controller import netfilter
from harness.controller import procs as procs_mod
from harness.controller.backends.docker import ip_cmd
from harness.controller.backends.local import LocalBackend, port_free
from harness.controller.backends.process_nodes import last_lines, offset_text
from harness.controller.backends.ssh.hosts import Host, HostsFile, check_fits, environment_unmet
from harness.controller.backends.ssh.transport import Remote, each, text_tail
from harness.controller.places import active_dir
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.capabilities import clock_mechanism
from harness.core.cluster import Node
from harness.core.errors import HarnessError

INSTALL_TIMEOUT = 900.0
STOP_TENTHS = 50


def this_machine() -> str:
    """Who the control host is, in markers (a controller pid means something only here)."""
    try:
        return Path("/etc/machine-id").read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


def marker_alive(marker: dict[str, Any]) -> bool | None:
    """Is the run of a host's marker still going? None: its controller is on another machine."""
    if marker.get("machine") != this_machine():
        return None
    pid, started = marker.get("controller"), marker.get("controller_started")
    if not isinstance(pid, int) or not isinstance(started, int):
        return False
    return procs_mod.owned(pid, started)


def parse_runs(text: str) -> tuple[dict[str, dict[str, Any]], str | None]:
    """``ssh_host.sh runs``: {run: marker} and the run that holds the claim."""
    runs: dict[str, dict[str, Any]] = {}
    claim = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "run":
            run, _, raw = rest.partition(" ")
            try:
                marker = json.loads(raw)
            except ValueError:
                marker = {}
            runs[run] = marker if isinstance(marker, dict) else {}
        elif kind == "claim":
            claim = rest.strip() or None
    return runs, claim


class SshBackend:
    name = "ssh"
    debian_packages: ClassVar[dict[str, str]] = {"ssh": "openssh-client"}  # on this host

    def __init__(self, run: RunDir, procs: ProcessTable, run_id: str, hosts: HostsFile,
                 say: Callable[[str], None] | None = None) -> None:
        self.run = run
        self.procs = procs
        self.run_id = run_id
        self.file = hosts
        self.say = say or (lambda text: None)
        self.slug = run_id.replace("/", "__")
        self.comment = netfilter.Netfilter(run_id).comment  # as on the control host
        self.node_hosts: list[Host] = []
        self.remotes: dict[str, Remote] = {}  # host name -> its connection
        self.claimed: list[Host] = []
        self.placed: dict[str, Host] = {}  # node name -> the host it runs on
        self.hosts: dict[str, str] = {}  # endpoint name -> address (nodes, clients)
        self.dbs: dict[str, Any] = {}
        self.env: dict[str, list[str]] = {}  # node -> `env K=V ...` for its server
        self.clock_modes: dict[str, str] = {}  # node -> the clock(s) libfaketime fakes there
        self.local: LocalBackend | None = None
        self._client_addrs: list[str] = []
        self._added_addrs: list[str] = []
        self._cut_hosts: set[str] = set()
        self._checked: set[tuple[str, str]] = set()  # (host, requirement) known present

    # set-up ----------------------------------------------------------------------------------
    def prepare(self, port: int, nodes: int, clients: int, resource_port: int | None = None
                ) -> None:
        """Connect to the hosts, claim them for this run, add the clients' addresses."""
        check_fits(self.file, nodes, clients)
        self.node_hosts = list(self.file.hosts[:nodes])
        used = [*self.node_hosts, *([self.file.resource] if self.file.resource else [])]
        tag = hashlib.sha1(self.run_id.encode()).hexdigest()[:10]
        control = active_dir() / "ssh"
        self.remotes = {h.name: Remote(h, control / f"{tag}-{h.name}") for h in used}
        self.run.logs.mkdir(parents=True, exist_ok=True)
        for h in used:  # from this thread (see Remote.open), then wait for all at once
            self.remotes[h.name].open(self.procs, self.run.log(f"ssh-{h.name}"))
        each(used, lambda h: self.remotes[h.name].wait_open())
        each(used, self._claim)
        if self.file.resource is None:
            self.local = LocalBackend(self.run, self.procs, self.run_id)
            self.local.claim_slot(port, 0, resource_port)
        if self.file.clients is not None:
            self._client_addrs = list(self.file.clients.addresses[:clients])
            self._add_client_addresses()

    def _claim(self, host: Host) -> None:
        marker = json.dumps({"run_id": self.run_id, "run_dir": str(self.run.path),
                             "comment": self.comment, "machine": this_machine(),
                             "control_host": socket.gethostname(), "controller": os.getpid(),
                             "controller_started": procs_mod.start_time(os.getpid()),
                             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        remote = self.remotes[host.name]
        for attempt in range(2):
            answer = remote.helper("claim", host.dir, self.slug, marker).strip()
            if answer == "claimed":
                self.claimed.append(host)
                return
            holder = answer.removeprefix("busy").strip()
            runs, _ = parse_runs(remote.helper("runs", host.dir))
            other = runs.get(holder, {})
            if attempt == 0 and marker_alive(other) is False:
                self.say(f"{host.name}: removing what dead run {holder or '(unnamed)'} left")
                remote.helper("teardown", host.dir, holder, str(other.get("comment", "")))
                continue
            who = (f"run {other.get('run_id', holder)} (controller pid {other.get('controller')}"
                   f" on {other.get('control_host', 'another machine')})")
            raise HarnessError(f"{host.describe()} is in use by {who}: wait for it to end, or "
                               f"`harness clean --hosts {self.file.path}` if it is gone")

    def _add_client_addresses(self) -> None:
        clients = self.file.clients
        assert clients is not None
        for addr in self._client_addrs:
            if clients.interface is None:
                if not _is_local(addr):
                    raise HarnessError(f"client address {addr} is not an address of this "
                                       "machine: add it, or name the interface in [clients] "
                                       f"of {self.file.path} so that runs add it")
                continue
            ip_cmd("addr", "replace", f"{addr}/32", "dev", clients.interface)
            self._added_addrs.append(addr)

    # addresses -------------------------------------------------------------------------------
    def node_host(self, index: int) -> str:
        return self.node_hosts[index].address

    def client_host(self, process: int) -> str:
        return self._client_addrs[process] if self._client_addrs else "0.0.0.0"

    def resource_host(self) -> str:
        if self.file.resource is not None:
            return self.file.resource.address
        assert self.local is not None
        return self.local.resource_host()

    def client_networks(self) -> list[str]:
        if not self._client_addrs:
            return []  # no addresses of their own: connect from the control host's
        return [f"{h.address}/32" for h in self.file.every_host()]

    def client_group(self, process: int) -> int | None:
        return None  # clients bind the addresses of the hosts file themselves

    def register_endpoint(self, name: str, host: str) -> None:
        self.hosts[name] = host

    def environment_unmet(self, capability: type) -> str | None:
        return environment_unmet(self.file, capability)

    # nodes -----------------------------------------------------------------------------------
    def _is_local(self, node: Node) -> bool:
        return self.local is not None and node.name == "resource"

    def _host(self, node: Node) -> Host:
        host = self.placed.get(node.name)
        if host is None:
            host = next((h for h in self.file.every_host() if h.address == node.host), None)
            if host is None:
                raise HarnessError(f"{node.name}: no host in {self.file.path} has its address "
                                   f"{node.host}")
            self.placed[node.name] = host
            self.hosts[node.name] = node.host
        return host

    def _remote(self, node: Node) -> Remote:
        return self.remotes[self._host(node).name]

    def _paths(self, node: Node) -> tuple[str, str, str]:
        """(node directory, log, pid file) of a node on its host."""
        run_dir = f"{self._host(node).dir}/runs/{self.slug}"
        node_dir = f"{run_dir}/nodes/{node.name}"
        return node_dir, f"{run_dir}/logs/{node.name}.log", f"{node_dir}/server.pid"

    def mount_host_dirs(self, db: Any) -> None:
        if db.host_dirs:
            raise HarnessError(f"--backend ssh cannot run --db {db.name}: its nodes need "
                               f"{', '.join(db.host_dirs)} of this host; use --backend local")

    def preflight(self, db: Any, nodes: list[Node], partitions: bool) -> None:
        """Place every node on its host; with partitions, iptables must work on the DB nodes'
        hosts (installed with apt if missing). What the servers need is checked (and
        installed) in :meth:`provision`, which knows each server's own DB."""
        remote = [n for n in nodes if not self._is_local(n)]
        if remote and (db.user or any(db.init_argv(n, PurePosixPath(self._paths(n)[0]))
                                      for n in remote)):
            raise HarnessError(f"--backend ssh cannot run --db {db.name} on a host yet (it "
                               "needs a one-time init as its own user): use --backend local "
                               "or docker")
        for node in remote:
            self._host(node)
        if not partitions:
            return
        hosts = {self._host(n).name: self._host(n) for n in remote if n.name != "resource"}

        def check(host: Host) -> None:
            self._ensure(host, {"iptables": "iptables"}, "partitions")
            proc = self.remotes[host.name].call("iptables", check=False)
            if proc.returncode != 0:
                raise HarnessError(f"{host.describe()}: iptables does not work there (it needs "
                                   "root or sudo, and NET_ADMIN in a container): "
                                   f"{text_tail(proc.stderr)}")

        each(hosts.values(), check)

    def provision(self, db: Any, nodes: list[Node]) -> None:
        local = [n for n in nodes if self._is_local(n)]
        if local and self.local is not None:
            db.check_environment()
            for node in local:
                port_free(node)
            self.local.provision(db, local)
        remote = [n for n in nodes if not self._is_local(n)]
        if not remote:
            return
        needs = requirements(db, remote[0], PurePosixPath(self._paths(remote[0])[0]))
        by_host = {self._host(n).name: self._host(n) for n in remote}
        each(by_host.values(), lambda h: self._ensure(h, needs, f"{db.name}"))

        def put(node: Node) -> None:
            self.dbs[node.name] = db
            node_dir = self._paths(node)[0]
            files = db.files(node, nodes, PurePosixPath(node_dir))
            args = [x for name, text in files.items()
                    for x in (name, base64.b64encode(text.encode()).decode())]
            self._remote(node).helper("put", node_dir, *args)

        each(remote, put)

    def _ensure(self, host: Host, needs: dict[str, str | None], purpose: str) -> None:
        """Install with apt what ``needs`` (command or path -> Debian package) finds missing."""
        names = [n for n in needs if (host.name, n) not in self._checked]
        if not names:
            return
        remote = self.remotes[host.name]
        missing = remote.helper("missing", *names).split()
        if missing:
            unknown = [m for m in missing if not needs.get(m)]
            if unknown:
                raise HarnessError(f"{host.describe()}: {unknown[0]} is missing (for {purpose})"
                                   " and no Debian package is known for it: install it there")
            self._install(host, sorted({str(needs[m]) for m in missing}), missing, purpose)
            still = remote.helper("missing", *missing).split()
            if still:
                raise HarnessError(f"{host.describe()}: apt did not bring {still[0]}; see "
                                   f"{self.run.log(f'apt-{host.name}')}")
        self._checked.update((host.name, n) for n in names)

    def _install(self, host: Host, packages: list[str], missing: list[str],
                 purpose: str) -> None:
        self.say(f"{host.name}: installing {' '.join(packages)} with apt "
                 f"({', '.join(missing)} missing, for {purpose})")
        log = self.run.log(f"apt-{host.name}")
        proc = self.remotes[host.name].call("install", *packages, timeout=INSTALL_TIMEOUT,
                                            check=False)
        with log.open("ab") as fh:
            fh.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise HarnessError(f"{host.describe()}: apt-get install {' '.join(packages)} "
                               f"failed: {text_tail(proc.stdout + proc.stderr)}; see {log}")

    def enable_clock(self, node: Node, clock: str = "wall") -> None:
        """Run this node's server under libfaketime (the wall clock, or ``"both"``), its
        offset in a file on the host."""
        host = self._host(node)
        remote = self.remotes[host.name]
        lib = remote.helper("faketime").strip()
        if not lib:
            self._install(host, ["libfaketime"], ["libfaketime.so.1"], "clock faults")
            lib = remote.helper("faketime").strip()
        if not lib:
            raise HarnessError(f"{host.describe()}: libfaketime is installed but not where "
                               "Debian puts it (/usr/lib/<arch>/faketime)")
        offset_file = f"{self._paths(node)[0]}/faketime"
        remote.helper("clock", offset_file, "+0s")
        self.env[node.name] = ["env", *(f"{k}={v}" for k, v in
                                        faketime_env(lib, offset_file, clock).items())]
        self.clock_modes[node.name] = clock

    def set_clock(self, node: Node, offset: float, clock: str = "wall") -> None:
        if clock_mechanism(self.dbs.get(node.name)) == "vdso":
            raise HarnessError(f"{node.name}: its clock is moved by patching its vDSO, which "
                               "runs on this machine only (local and docker backends)")
        check_clock(node.name, self.clock_modes.get(node.name), clock)
        self._remote(node).helper("clock", f"{self._paths(node)[0]}/faketime",
                                  offset_text(offset))

    def start(self, node: Node) -> None:
        if self._is_local(node):
            assert self.local is not None
            self.local.start(node)
            return
        db = self.dbs[node.name]
        node_dir, log, pidfile = self._paths(node)
        argv = [*self.env.get(node.name, []), *db.argv(node, PurePosixPath(node_dir))]
        self._remote(node).helper("start", pidfile, log, *argv)

    def _signal(self, node: Node, sig: str) -> None:
        self._remote(node).helper("signal", self._paths(node)[2], sig)

    def stop(self, node: Node) -> None:
        if self._is_local(node):
            assert self.local is not None
            self.local.stop(node)
            return
        self._remote(node).helper("stop", self._paths(node)[2], str(STOP_TENTHS))

    def kill(self, node: Node) -> None:
        if self._is_local(node):
            assert self.local is not None
            self.local.kill(node)
            return
        out = self._remote(node).helper("kill", self._paths(node)[2]).strip()
        if out not in ("killed", "gone"):
            raise HarnessError(f"{node.name}: still running 5 s after SIGKILL on "
                               f"{self._host(node).describe()}")

    def pause(self, node: Node) -> None:
        self._signal(node, "STOP")

    def resume(self, node: Node) -> None:
        self._signal(node, "CONT")

    def is_running(self, node: Node) -> bool:
        if self._is_local(node):
            assert self.local is not None
            return self.local.is_running(node)
        return self._remote(node).helper("running", self._paths(node)[2]).strip() == "yes"

    def answers(self, node: Node) -> bool:
        """One probe of the DB's own, from the control host (as the clients see the node)."""
        return bool(self.dbs[node.name].ready(node)) if not self._is_local(node) \
            else bool(self.local is not None and self.local.answers(node))

    def wait_ready(self, node: Node, timeout: float) -> None:
        if self._is_local(node):
            assert self.local is not None
            self.local.wait_ready(node, timeout)
            return
        db = self.dbs[node.name]
        host = self._host(node)
        deadline = time.monotonic() + timeout
        next_check = 0.0
        while time.monotonic() < deadline:
            if db.ready(node):
                return
            if time.monotonic() >= next_check:
                if not self.is_running(node):
                    raise HarnessError(f"{node.name} ({db.name}) exited at start on "
                                       f"{host.name}{self._under_faketime(node)}: "
                                       f"{self._log_tail(node)}")
                next_check = time.monotonic() + 0.5
            time.sleep(0.05)
        self._log_tail(node)
        raise HarnessError(f"{node.name} ({db.name}) not ready after {timeout:.0f} s on "
                           f"{host.describe()}; see {self.run.log(node.name)}")

    def _under_faketime(self, node: Node) -> str:
        return " under libfaketime" if node.name in self.env else ""

    def _log_tail(self, node: Node) -> str:
        """Fetch the node's log into the run directory; its last lines."""
        self.fetch_log(node)
        return last_lines(self.run.log(node.name))

    def fetch_log(self, node: Node) -> None:
        text = self._remote(node).helper("cat", self._paths(node)[1], check=False)
        self.run.log(node.name).write_text(text)

    # network ---------------------------------------------------------------------------------
    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        """Rules on the hosts of the nodes: each drops everything to and from the other end."""
        rules: dict[str, set[str]] = {}
        for a, b in links:
            for here, there in ((a, b), (b, a)):
                host = self.placed.get(here)
                if host is None:
                    continue  # a client (or the control host's resource): its peer's rule
                if there not in self.placed and not self._client_addrs:
                    raise HarnessError(
                        f"cannot cut {there} alone: the clients share the control host's "
                        f"address; give them their own in [clients] of {self.file.path}")
                addr = self.hosts[there]
                if addr != host.address:
                    rules.setdefault(host.name, set()).add(addr)
        each(rules.items(), lambda item: self.remotes[item[0]].helper(
            "cut", self.comment, *sorted(item[1])))
        self._cut_hosts |= set(rules)

    def heal(self) -> None:
        hosts = sorted(self._cut_hosts)
        each(hosts, lambda name: self.remotes[name].helper("heal", self.comment))
        self._cut_hosts.clear()

    # teardown --------------------------------------------------------------------------------
    def teardown(self) -> None:
        """Stop every server, fetch the logs, remove the run's rules and files and the claim
        on every host; then the connections, the clients' addresses, the local resource."""
        def host_down(host: Host) -> None:
            remote = self.remotes[host.name]
            run_dir = f"{host.dir}/runs/{self.slug}"
            try:
                remote.helper("stop_all", run_dir, timeout=30)
                for name, placed in self.placed.items():
                    if placed.name == host.name and name in self.dbs:
                        self.fetch_log(Node(name, placed.address, 0))
                remote.helper("teardown", host.dir, self.slug, self.comment, timeout=60)
            except HarnessError as e:
                self.say(f"teardown: {e}; `harness clean --hosts {self.file.path}` removes "
                         "what is left")
        try:
            each(self.claimed, host_down)
            self.claimed = []
        finally:
            if self.local is not None:
                self.local.teardown()
            for addr in self._added_addrs:
                assert self.file.clients is not None and self.file.clients.interface
                ip_cmd("addr", "del", f"{addr}/32", "dev", self.file.clients.interface,
                       check=False)
            self._added_addrs = []
            for remote in self.remotes.values():
                if remote.unmultiplexed:
                    self.say(f"{remote.host.name}: {remote.unmultiplexed} command(s) found no "
                             "ssh master connection and opened their own (slower); see "
                             f"{self.run.log(f'ssh-{remote.host.name}')}")
                remote.close()


def requirements(db: Any, node: Node, node_dir: PurePosixPath) -> dict[str, str | None]:
    """What a server needs on its host: its program (the first word of its command line) and
    whatever the DB names in ``debian_packages`` ({command or path: Debian package})."""
    packages: dict[str, str] = dict(db.debian_packages)
    program = str(db.argv(node, node_dir)[0])
    need: dict[str, str | None] = {program: packages.get(program)
                                   or packages.get(posixpath.basename(program))}
    need.update(packages)
    return need


def _is_local(addr: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((addr, 0))
        except OSError:
            return False
    return True


# harness clean --hosts ----------------------------------------------------------------------------
def clean_hosts(hosts: HostsFile, force: bool = False,
                say: Callable[[str], None] = print) -> tuple[int, int, int]:
    """Remove what runs that are gone left on the hosts (servers, rules, files, claims) and
    the clients' addresses on the control host. With ``force``, also runs that still go, or
    whose controller is on another machine. Returns (runs, rules, addresses) removed."""
    def one(host: Host) -> tuple[int, int, bool]:
        try:
            return clean_host(host)
        except HarnessError as e:  # one unreachable host does not stop the others' cleaning
            say(f"harness: {e}")
            return 0, 0, True

    def clean_host(host: Host) -> tuple[int, int, bool]:
        remote = Remote(host)
        runs, _ = parse_runs(remote.helper("runs", host.dir))
        live: list[str] = []
        removed = 0
        for run, marker in sorted(runs.items()):
            alive = marker_alive(marker)
            if alive is not False and not force:
                where = ("is still in progress" if alive else
                         f"belongs to control host {marker.get('control_host', '?')}")
                say(f"{host.name}: run {marker.get('run_id', run)} {where}; --force removes it")
                live.append(str(marker.get("comment", "")))
                continue
            remote.helper("teardown", host.dir, run, str(marker.get("comment", "")))
            removed += 1
        rules = remote.helper("orphans", host.dir, *[c for c in live if c]).strip()
        return removed, int(rules or 0), bool(live)

    results = each(hosts.every_host(), one)
    live_any = any(r[2] for r in results)
    addrs = 0
    clients = hosts.clients
    if clients is not None and clients.interface is not None and not live_any:
        present = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", clients.interface],
                                 capture_output=True, text=True, timeout=10).stdout
        mine = {line.split()[3].split("/")[0] for line in present.splitlines()
                if len(line.split()) > 3}
        for addr in clients.addresses:
            if addr in mine:
                with contextlib.suppress(HarnessError):
                    ip_cmd("addr", "del", f"{addr}/32", "dev", clients.interface)
                    addrs += 1
    return sum(r[0] for r in results), sum(r[1] for r in results), addrs
