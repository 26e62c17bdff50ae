"""The docker backend: one container per node on a bridge network of the run's own.

Each container runs an idle PID 1 and the server is started inside it with ``docker exec``, so
a server can be killed and restarted while its container, its network namespace and its
iptables rules stay: a crash, not a new machine. The server's host pid is found once it runs, and
pause / resume / kill are plain signals to that pid, exactly as on the local backend.

- Node files live on the host under ``<run>/nodes/<name>`` (mounted at ``/node``); logs go to
  ``<run>/logs/<name>.log`` (``/logs`` is mounted), so nothing needs copying out.
- Clients stay on the host. Each gets its own address on the network's bridge (from the top of
  the subnet), which it binds before connecting, so iptables inside a node can match one client.
- Partitions: iptables rules inside each node's network namespace, made by
  :mod:`harness.controller.netfilter` as on the local backend (its chain ``LOCK-HARNESS``, from
  INPUT and OUTPUT here, and the run's comment); healing removes the run's cuts everywhere. A
  one-way cut drops only what one side sends; packet loss is a ``statistic --mode random``
  rule, so healing a cut leaves it.
- The link layer (a proxy, :mod:`harness.controller.links`) runs on the host with the clients:
  its listeners are on 127.0.0.1 and its legs to the nodes leave from the clients' bridge
  addresses, so the rules above cut them. Links between nodes do not go through it (the nodes
  dial each other inside their own network namespaces).
- Clocks: a server started with libfaketime reads its offset from ``/node/faketime``
  (``FAKETIME_TIMESTAMP_FILE`` + ``FAKETIME_NO_CACHE``), so the offset changes while it runs.
- Everything carries the labels ``lock-harness=1`` and ``lock-harness.run=<run id>``; teardown,
  Ctrl-C and ``harness clean`` remove containers and networks by those labels.
- A DB that runs as a user of its own (``user``: PostgreSQL) keeps its node directory in the
  container (``/scratch/<node>``, gone with it), owned by that user; its ``init_argv`` runs
  once as that user, and the server is started through ``setpriv`` (the log is still
  appended by the root shell).
- Clients whose library opens sockets in C (libpq) cannot bind their address: in runs with
  partitions, each client runs with a group id of its own, and a host nat rule in the
  project's chain rewrites that group's connections into the network to the client's address.
- A server the image lacks (a DB's ``host_dirs``: Spanner's emulator, Google's package) runs
  from this host's directory, mounted read-only at the same path in every container.
- Power loss (runs with a fault that needs it alone): the node's container also gets
  ``/dev/fuse``, ``SYS_ADMIN`` (to mount) and no AppArmor profile (Docker's default one denies
  mounts), this package read-only at ``/opt/lock-harness/py/harness`` and the run's
  ``syncfs/`` at ``/syncfs``. The filesystem that forgets unsynced data
  (:mod:`harness.controller.syncfs_runner`, on the image's python3 and mfusepy) is mounted
  inside the container over the server's data directory before its first start, and takes its
  orders on ``/syncfs/<node>.sock``, which the host reaches through the container's root
  (:mod:`harness.controller.syncfs_orders`). It goes with the container. The server's pid file is
  then ``/syncfs/<node>.pid``, off the filesystem; pid files are read through the container's
  own mounts (``/proc/PID/root``).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from dbs.faketime import LIBFAKETIME_PATHS, faketime_env
from harness.controller import netfilter, syncfs_mounts, vdso_clock
from harness.controller.backends.process_nodes import ProcessNodes, last_lines
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.controller.syncfs_orders import ask
from harness.core.capabilities import (
    ClientLinks,
    Iptables,
    LinkLayer,
    PacketRules,
    PeerLinks,
    PowerLoss,
)
from harness.core.cluster import Node
from harness.core.errors import HarnessError
from harness.core.shipped import shipped

LABEL = "lock-harness"
RUN_LABEL = "lock-harness.run"
IMAGE = "lock-harness/node:latest"
FAKETIME_LIB = LIBFAKETIME_PATHS[0]  # where Debian's libfaketime is in the (amd64) node image
PACKAGE = Path(__file__).resolve().parents[2]  # this harness package, mounted for syncfs
NODE_PYTHONPATH = "/opt/lock-harness/py"


def client() -> Any:
    """A Docker SDK client, or one line saying how to get an engine."""
    try:
        import docker  # the SDK (this repository's docker/ folder has no __init__.py)

        c = docker.from_env(timeout=30)
        c.ping()
        return c
    except Exception as e:
        raise HarnessError(f"no Docker engine answers ({type(e).__name__}): run `bash setup.sh`"
                           " (it installs docker.io and starts dockerd)") from None


def ensure_image(c: Any) -> str:
    """The node image, built offline (docker/build_image.py) if it is not there yet."""
    import docker

    try:
        c.images.get(IMAGE)
        return IMAGE
    except docker.errors.ImageNotFound:
        pass
    script = shipped("docker") / "build_image.py"
    print(f"building the node image ({script}); this takes a few minutes "
          "the first time", flush=True)
    proc = subprocess.run([os.environ.get("PYTHON", sys.executable), str(script)], timeout=3600)
    if proc.returncode != 0:
        raise HarnessError(f"the node image could not be built: see {script.parent}/README.md")
    return IMAGE


class DockerBackend(ProcessNodes):
    name = "docker"
    debian_packages: ClassVar[dict[str, str]] = {"docker": "docker.io"}

    @staticmethod
    def unavailable() -> str | None:
        """Why no run can start here (no engine answers), or None."""
        try:
            client().close()
        except HarnessError as e:
            return str(e).split(":")[0]
        return None

    def __init__(self, run: RunDir, procs: ProcessTable, run_id: str) -> None:
        self.run = run
        self.procs = procs
        self.run_id = run_id
        self.dbs: dict[str, Any] = {}
        self.hosts: dict[str, str] = {}
        self.containers: dict[str, Any] = {}
        self.network: Any = None
        self.bridge = ""
        self.subnet: ipaddress.IPv4Network | None = None
        self.clock_env: dict[str, dict[str, str]] = {}
        self.clock_modes: dict[str, str] = {}  # node -> the clock(s) libfaketime fakes there
        self._client_addrs: list[str] = []
        self._docker: Any = None
        self._partitions = False
        self.net = netfilter.Netfilter(run_id)  # the host's: the clients' source nat
        self.nets: dict[str, netfilter.Netfilter] = {}  # each container's network namespace
        self._client_groups: dict[int, int] = {}
        self.syncfs_nodes: list[str] = []  # nodes whose data directory loses power
        self.syncfs_dirs: dict[str, Path] = {}  # those mounted: node -> directory inside
        self.host_dirs: dict[str, dict[str, str]] = {}  # DBs' host_dirs, as docker volumes

    # set-up ----------------------------------------------------------------------------------
    def prepare(self, port: int, nodes: int, clients: int, resource_port: int | None = None
                ) -> None:
        """Engine, image, network and one idle container per node plus the resource."""
        self._docker = c = client()
        image = ensure_image(c)
        labels = {LABEL: "1", RUN_LABEL: self.run_id}
        # docker names take [a-zA-Z0-9_.-] only (a test name joins nemeses with "+"). The run
        # id's own random tail (store.py) keeps two runs of one test started in the same second
        # apart; this one also keeps apart a run id from before it (docker lets two networks
        # share a name, and then refuses to attach a container to either: "ambiguous").
        slug = re.sub(r"[^A-Za-z0-9.-]", "-", self.run_id)[-33:].lstrip(".-")
        slug = f"{slug}-{secrets.token_hex(3)}"
        self.network = c.networks.create(f"lh-{slug}", driver="bridge", labels=labels)
        self.network.reload()
        cfg = self.network.attrs["IPAM"]["Config"][0]
        self.subnet = ipaddress.ip_network(cfg["Subnet"])
        self.bridge = "br-" + self.network.id[:12]
        self.run.logs.mkdir(exist_ok=True)
        names = [f"n{i + 1}" for i in range(nodes)] + ["resource"]
        for name in names:
            node_dir = self.run.node_dir(name)
            node_dir.mkdir(parents=True, exist_ok=True)
            (node_dir / "faketime").write_text("+0s\n")
            volumes = {str(node_dir): {"bind": "/node", "mode": "rw"},
                       str(self.run.logs): {"bind": "/logs", "mode": "rw"}, **self.host_dirs}
            extra = self._fuse(volumes) if name in self.syncfs_nodes else {}
            self.containers[name] = c.containers.run(
                image, ["sleep", "infinity"], detach=True, name=f"lh-{slug}-{name}",
                hostname=name, labels={**labels, "lock-harness.node": name},
                network=self.network.name, volumes=volumes,
                **{"cap_add": ["NET_ADMIN"], **extra},
            )
        for name, ctr in self.containers.items():
            ctr.reload()
            ip = ctr.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
            self.hosts[name] = ip
            self.nets[name] = netfilter.Netfilter(
                self.run_id, netns=f"/proc/{ctr.attrs['State']['Pid']}/ns/net",
                hooks=("INPUT", "OUTPUT"))
        for p in range(clients):
            addr = self.client_host(p)
            ip_cmd("addr", "add", f"{addr}/32", "dev", self.bridge)
            self._client_addrs.append(addr)

    def mount_host_dirs(self, db: Any) -> None:
        """Every container gets the DB's ``host_dirs`` read-only at the same path, once the
        DB's check of this host passed (docker would make a missing one, empty)."""
        if db.host_dirs:
            db.check_environment()
        self.host_dirs.update({d: {"bind": d, "mode": "ro"} for d in db.host_dirs})

    def _fuse(self, volumes: dict[str, dict[str, str]]) -> dict[str, Any]:
        """What a container needs to mount the power-loss filesystem (its ``run`` arguments;
        ``volumes`` gains the package and the record's folder)."""
        record = self.run.path / "syncfs"
        record.mkdir(exist_ok=True)
        volumes[str(PACKAGE)] = {"bind": f"{NODE_PYTHONPATH}/harness", "mode": "ro"}
        volumes[str(record)] = {"bind": "/syncfs", "mode": "rw"}
        return {"devices": ["/dev/fuse:/dev/fuse:rwm"], "cap_add": ["NET_ADMIN", "SYS_ADMIN"],
                "security_opt": ["apparmor=unconfined"]}

    # addresses -------------------------------------------------------------------------------
    def node_host(self, index: int) -> str:
        return self.hosts[f"n{index + 1}"]

    def client_host(self, process: int) -> str:
        assert self.subnet is not None
        return str(self.subnet.broadcast_address - 255 + process + 1)

    def resource_host(self) -> str:
        return self.hosts["resource"]

    def client_networks(self) -> list[str]:
        return [str(self.subnet)]

    def register_endpoint(self, name: str, host: str) -> None:
        self.hosts[name] = host

    def client_group(self, process: int) -> int | None:
        if not self._partitions:
            return None
        if process not in self._client_groups:
            self._client_groups[process] = self.net.source_nat(self.client_host(process),
                                                               str(self.subnet))
        return self._client_groups[process]

    def environment_unmet(self, capability: type) -> str | None:
        if capability in (Iptables, ClientLinks, LinkLayer, PacketRules):
            return None  # every container has iptables and NET_ADMIN; clients own addresses;
            # the link layer's proxy runs on the host with the clients
        if capability is PowerLoss:
            return None if os.path.exists("/dev/fuse") else (
                "power loss needs FUSE, and this host has no /dev/fuse to give the containers")
        if capability is PeerLinks:
            return ("the docker backend does not route links between nodes through the link "
                    "layer (each node dials its peers inside its own network namespace): use "
                    "--backend local")
        return f"the docker backend has no {getattr(capability, '__name__', capability)}"

    def door_host(self, host: str) -> str | None:
        return None  # the proxy listens on the host's loopback, where the clients are

    def enable_doors(self) -> None:
        return None

    # nodes -----------------------------------------------------------------------------------
    def preflight(self, db: Any, nodes: list[Node], partitions: bool) -> None:
        self._partitions = self._partitions or partitions
        return None  # the image has every server; the engine answered in prepare()

    def _home(self, node: Node) -> tuple[str, Path, Path]:
        """(container, directory on the host, the same inside the container) of a node. A
        node that has no container of its own (a companion process such as a Sentinel, on a
        DB node's address) lives in the container with its address, in a subdirectory."""
        if node.name in self.containers:
            return node.name, self.run.node_dir(node.name), Path("/node")
        ctr = next((n for n in self.containers if self.hosts.get(n) == node.host), None)
        if ctr is None:
            raise HarnessError(f"{node.name}: no container has its address {node.host}")
        return ctr, self.run.node_dir(ctr) / node.name, Path("/node") / node.name

    def db_dir(self, node: Node) -> Path:
        """The node directory the DB is told about, inside the container."""
        db = self.dbs.get(node.name)
        if db is not None and db.user:
            return Path("/scratch") / node.name
        return self._home(node)[2]

    def provision(self, db: Any, nodes: list[Node]) -> None:
        user = db.user
        for node in nodes:
            self.dbs[node.name] = db
            ctr, host_dir, inner = self._home(node)
            host_dir.mkdir(parents=True, exist_ok=True)
            if not user:
                for fname, content in db.files(node, nodes, inner).items():
                    (host_dir / fname).write_text(content)
            else:
                d = self.db_dir(node)
                self._exec(ctr, f"mkdir -p {d} && chown {user}: {d}")
                put_files(self.containers[ctr], d, db.files(node, nodes, d), user)
                self._exec(ctr, f"chown -R {user}: {d}")
            argv = db.init_argv(node, self.db_dir(node))
            if argv:
                res = self.containers[ctr].exec_run(argv, user=user or "",
                                                    environment={"LD_PRELOAD": ""})
                with self.log_file(node).open("ab") as fh:
                    fh.write(res.output or b"")
                if res.exit_code != 0:
                    raise HarnessError(f"{node.name}: {os.path.basename(argv[0])} exited "
                                       f"{res.exit_code}: {last_lines(self.log_file(node))}")

    def enable_clock(self, node: Node, clock: str = "wall") -> None:
        """Start this node's server under libfaketime (the wall clock, or ``"both"``), its
        offset read from /node/faketime."""
        self.clock_env[node.name] = faketime_env(FAKETIME_LIB, "/node/faketime", clock)
        self.clock_modes[node.name] = clock

    def clock_file(self, node: Node) -> Path:
        return self.run.node_dir(node.name) / "faketime"  # /node/faketime in the container

    def start(self, node: Node) -> None:
        db = self.dbs[node.name]
        ctr, host_dir, inner = self._home(node)
        argv = db.argv(node, self.db_dir(node))
        user = db.user
        if user:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *argv]
        # a node on the power-loss filesystem keeps its pid file off it: a real one is
        # unsynced (and dropped) too, but it would hide "nothing the server wrote was lost"
        pidfile = Path("/syncfs") / f"{node.name}.pid" if node.name in self.syncfs_nodes \
            else inner / "server.pid"
        (host_dir / "server.pid").unlink(missing_ok=True)
        (self.run.path / "syncfs" / f"{node.name}.pid").unlink(missing_ok=True)
        if node.name in self.syncfs_nodes:
            self._mount(node)
        script = (f"echo $$ > {pidfile}; exec {shlex.join(argv)} "
                  f">> /logs/{node.name}.log 2>&1")
        self.containers[ctr].exec_run(["sh", "-c", script], detach=True,
                                      environment=self.clock_env.get(node.name, {}))
        self.procs.adopt(node.name, self._host_pid(ctr, pidfile))
        vdso_clock.reapply(self.procs, db, node.name)  # restarted while patched: again

    def _init_pid(self, name: str) -> int:
        """The host pid of the container's PID 1."""
        ctr = self.containers[name]
        ctr.reload()
        return int(ctr.attrs["State"]["Pid"])

    def _host_pid(self, name: str, inner: Path, timeout: float = 10.0) -> int:
        """The host pid of the server, from the pid it wrote to ``inner`` (a path inside the
        container, read through the container's mounts) inside the container."""
        deadline = time.monotonic() + timeout
        init_pid = self._init_pid(name)
        pidfile = Path(f"/proc/{init_pid}/root") / inner.relative_to("/")
        ns = os.readlink(f"/proc/{init_pid}/ns/pid")
        while time.monotonic() < deadline:
            try:
                inner = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                time.sleep(0.02)
                continue
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    if os.readlink(f"/proc/{entry.name}/ns/pid") != ns:
                        continue
                    status = Path(f"/proc/{entry.name}/status").read_text()
                except OSError:
                    continue
                nspid = next((ln.split()[1:] for ln in status.splitlines()
                              if ln.startswith("NSpid:")), [])
                if nspid and int(nspid[-1]) == inner:
                    return int(entry.name)
            time.sleep(0.02)
        raise HarnessError(f"{name}: the server did not start in its container; see "
                           f"{self.run.log(name)}")

    # power loss ------------------------------------------------------------------------------
    def enable_power_loss(self, names: list[str]) -> None:
        self.syncfs_nodes = list(names)

    def _mount(self, node: Node) -> None:
        """Mount the power-loss filesystem over the node's data directory in its container
        (once: it stays mounted across restarts, as a disk does)."""
        if node.name in self.syncfs_dirs:
            return
        directory = self.db_dir(node)
        ctr = self._home(node)[0]
        log = f"/logs/syncfs-{node.name}.log"
        script = (f"exec python3 -m harness.controller.syncfs_runner {directory} "
                  f"/syncfs/{node.name}.jsonl /syncfs/{node.name}.sock >> {log} 2>&1")
        self.containers[ctr].exec_run(["sh", "-c", script], detach=True,
                                      environment={"PYTHONPATH": NODE_PYTHONPATH,
                                                   "LD_PRELOAD": ""})
        table = f"/proc/{self._init_pid(ctr)}/mounts"
        deadline = time.monotonic() + syncfs_mounts.MOUNT_TIMEOUT
        while not syncfs_mounts.mounted(directory, table):
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{node.name}: the power-loss filesystem did not mount over {directory} in "
                    f"its container ({last_lines(self.run.logs / f'syncfs-{node.name}.log')}); "
                    "an image built before power loss lacks mfusepy: rebuild it with "
                    "`python docker/build_image.py`")
            time.sleep(0.05)
        self.syncfs_dirs[node.name] = directory

    def _order(self, node: Node, order: str) -> dict[str, Any]:
        if node.name not in self.syncfs_dirs:
            raise HarnessError(f"{node.name}: its data directory is not on the power-loss "
                               "filesystem")
        where = f"/proc/{self._init_pid(self._home(node)[0])}/root/syncfs/{node.name}.sock"
        try:
            return syncfs_mounts.answer(ask(where, order))
        except OSError as e:
            raise HarnessError(f"{node.name}: the power-loss filesystem did not take the order "
                               f"{order!r} ({e})") from None

    def drop_unsynced(self, node: Node) -> dict[str, Any]:
        return self._order(node, "drop")

    def reachable_dir(self, node: Node) -> Path:
        """The server's directory through its container's root (``/proc/PID/root``): inside
        the container's mounts, so through the power-loss filesystem mounted there, not
        under it on the host's ``<run>/nodes``."""
        root = Path(f"/proc/{self._init_pid(self._home(node)[0])}/root")
        return root / self.db_dir(node).relative_to("/")

    def write_back(self, node: Node) -> dict[str, Any]:
        return self._order(node, "sync")

    # network ---------------------------------------------------------------------------------
    def _exec(self, name: str, script: str) -> None:
        res = self.containers[name].exec_run(["sh", "-c", script], environment={"LD_PRELOAD": ""})
        if res.exit_code != 0:
            raise HarnessError(f"{name}: `{script}` failed: "
                               f"{res.output.decode(errors='replace').strip()[:200]}")

    def _apply(self, rules: dict[str, list[list[str]]]) -> None:
        for name, batch in rules.items():
            self.nets[name].apply(batch)

    def _drop(self, *match: str, probability: float | None = None) -> list[str]:
        return netfilter.drop_rule(self.net.comment, *match, probability=probability)

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        rules: dict[str, list[list[str]]] = {}
        for a, b in links:
            for here, there in ((a, b), (b, a)):
                if here in self.containers:
                    ip = self.hosts[there]
                    rules.setdefault(here, []).extend([self._drop("-s", ip),
                                                       self._drop("-d", ip)])
        self._apply(rules)

    def cut_oneway(self, links: Iterable[tuple[str, str]]) -> None:
        """Drop what ``a`` sends ``b``: at ``b`` on the way in, at ``a`` on the way out."""
        rules: dict[str, list[list[str]]] = {}
        for a, b in links:
            if b in self.containers:
                rules.setdefault(b, []).append(self._drop("-s", self.hosts[a]))
            if a in self.containers:
                rules.setdefault(a, []).append(self._drop("-d", self.hosts[b]))
        self._apply(rules)

    def heal(self) -> None:
        for net in self.nets.values():
            with contextlib.suppress(HarnessError):
                net.heal()

    def lose(self, links: Iterable[tuple[str, str]], probability: float, *,
             both_ways: bool = True) -> None:
        """Each packet between the pair passes exactly one rule: in the container of the
        pair's node (the first one that is a node), on the way in or on the way out."""
        rules: dict[str, list[list[str]]] = {}
        for a, b in links:
            if b in self.containers:  # a -> b on the way into b; b -> a on its way out
                here, peer, ways = b, self.hosts[a], ("-s", "-d")
            elif a in self.containers:  # a -> b on its way out of a; b -> a on the way in
                here, peer, ways = a, self.hosts[b], ("-d", "-s")
            else:
                continue
            rules.setdefault(here, []).extend(
                self._drop(way, peer, probability=probability)
                for way in ways[:2 if both_ways else 1])
        self._apply(rules)

    def heal_loss(self) -> None:
        for net in self.nets.values():
            with contextlib.suppress(HarnessError):
                net.heal_loss()

    def lost_packets(self) -> int:
        return sum(net.dropped() for net in self.nets.values())

    def teardown(self) -> None:
        for name in self.containers:
            self.procs.send(name, signal.SIGCONT, group=True)
        for addr in self._client_addrs:
            ip_cmd("addr", "del", f"{addr}/32", "dev", self.bridge, check=False)
        if self._client_groups:
            with contextlib.suppress(HarnessError):
                self.net.teardown()
        remove_run(self._docker, self.run_id)


def put_files(container: Any, directory: Path, files: dict[str, str], owner: str) -> None:
    """Write ``files`` into ``directory`` of the container, owned by ``owner``."""
    if not files:
        return
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uname, info.gname = len(data), 0o644, owner, owner
            tar.addfile(info, io.BytesIO(data))
    if not container.put_archive(str(directory), buf.getvalue()):
        raise HarnessError(f"could not write {', '.join(files)} into {directory}")


def ip_cmd(*args: str, check: bool = True) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and proc.returncode != 0:
        raise HarnessError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def remove_run(c: Any, run_id: str | None) -> tuple[int, int]:
    """Remove the containers and networks of one run (or of every run: ``run_id=None``)."""
    if c is None:
        return 0, 0
    return remove_labelled(c, f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL)


def remove_labelled(c: Any, selector: str) -> tuple[int, int]:
    """Remove the containers, then the networks, that carry the label ``selector``."""
    containers = c.containers.list(all=True, filters={"label": selector})
    for ctr in containers:
        with contextlib.suppress(Exception):
            ctr.remove(force=True)
    networks = c.networks.list(filters={"label": selector})
    for net in networks:
        with contextlib.suppress(Exception):
            net.remove()
    return len(containers), len(networks)


def leftovers(c: Any, live: Callable[[], set[str]]) -> tuple[int, int]:
    """``harness clean``: remove what runs that are no longer alive left behind (``live``: the
    run ids in progress, asked after the listing, so that a run that began meanwhile stays)."""
    runs = {ctr.labels.get(RUN_LABEL) for ctr in c.containers.list(
        all=True, filters={"label": RUN_LABEL})}
    runs |= {net.attrs.get("Labels", {}).get(RUN_LABEL) for net in c.networks.list(
        filters={"label": RUN_LABEL})}
    total = (0, 0)
    keep = live()
    for run_id in sorted(r for r in runs if r and r not in keep):
        n = remove_run(c, run_id)
        total = (total[0] + n[0], total[1] + n[1])
    return total
