"""The link layer, the controller's side: which connections run through the proxy
(:mod:`harness.controller.linkproxy`), starting it, telling clients and DB nodes where to
connect, and the :class:`harness.core.cluster.LinkOps` a nemesis drives it with.

Routing is a controller feature, not a nemesis detail: a run turns the layer on when one of its
nemeses requires it (``LinkLayer``, ``PeerLinks``) or when asked (``--links proxy``), and then

- every client gets a listener of its own per DB endpoint (node or companion): its lock's
  ``LockConfig.nodes`` (and endpoints in its lock options, such as Sentinels) name those
  listeners instead of the servers, and the client process redirects connections its library
  makes to a server's own address (an address a Sentinel answered with, say) to the same
  listener. The lock library does not know. The proxy tells whose connection it is by the
  listener it arrived on, whatever address the library connected from, and dials the server
  from the client's own address, so that iptables partitions keep cutting it;
- where the backend can route them (``PeerLinks``) and the DB's peer addresses are ours to
  give (``RoutedPeers``), each DB node gets a "door" per peer port: the DB is configured to
  reach its peers there, and the proxy names the peer by the address it dials from.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from harness.controller.backends.process_nodes import last_lines
from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.core.atomic import write_json
from harness.core.cluster import Node, client_name, link_name
from harness.core.errors import HarnessError

PROXY = "links"  # the proxy's name in the process table and its log (logs/links.log)
START_TIMEOUT = 10.0
CONTROL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Route:
    """One listener of the proxy, to one DB endpoint."""

    id: str
    listen: tuple[str, int]
    dst: str
    upstream: tuple[str, int]
    src: str | None = None  # None: named by the address the connection comes from
    bind: str | None = None  # the leg to the server leaves from this address


class Links:
    """The run's link layer: routes, the proxy process, and LinkOps over its control port."""

    def __init__(self, run: RunDir, procs: ProcessTable, seed: int) -> None:
        self.run = run
        self.procs = procs
        self.seed = seed
        self.routes: list[Route] = []
        self.endpoints: dict[str, str] = {}  # address -> endpoint name (first one wins)
        self.by_client: dict[int, dict[str, Route]] = {}  # process -> dst name -> route
        self.targets: dict[str, Node] = {}  # the DB endpoints clients reach through it
        self.doors: dict[tuple[str, int], tuple[str, int]] = {}  # (node, port) -> door
        self.door_hosts: dict[str, str] = {}  # a node's own address -> its door's
        self.bound: dict[str, tuple[str, int]] = {}
        self._mu = threading.Lock()
        self._sock: socket.socket | None = None
        self._file: Any = None

    # planning -----------------------------------------------------------------------------------
    def add_endpoint(self, name: str, address: str) -> None:
        self.endpoints.setdefault(address, name)

    def route_clients(self, clients: Mapping[int, str], targets: Iterable[Node],
                      listen_host: Callable[[Node], str]) -> None:
        """A listener per (client, target): on ``listen_host(target)``, any free port."""
        for node in targets:
            self.targets[node.name] = node
        for p, host in clients.items():
            self.add_endpoint(client_name(p), host)
            for node in self.targets.values():
                route = Route(f"{client_name(p)}>{node.name}", (listen_host(node), 0), node.name,
                              (node.host, node.port), client_name(p), host)
                self.routes.append(route)
                self.by_client.setdefault(p, {})[node.name] = route

    def route_doors(self, nodes: Iterable[Node], ports: Iterable[int],
                    door_host: Callable[[str], str | None]
                    ) -> dict[tuple[str, int], tuple[str, int]]:
        """A door per (node, peer port), on the node's door address and the same port."""
        ports = list(ports)
        for node in nodes:
            self.add_endpoint(node.name, node.host)
            door = door_host(node.host)
            if door is None:
                raise HarnessError("this backend gives the link layer no addresses for doors")
            self.door_hosts[node.host] = door
            for port in ports:
                self.doors[(node.name, port)] = (door, port)
                self.routes.append(Route(f"door:{node.name}:{port}", (door, port), node.name,
                                         (node.host, port)))
        return dict(self.doors)

    # the proxy ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the proxy and wait until every listener is bound."""
        config = {"state": str(self.run.links_state), "seed": self.seed,
                  "control": ["127.0.0.1", 0], "endpoints": self.endpoints,
                  "routes": [asdict(r) for r in self.routes]}
        self.run.links_config.parent.mkdir(parents=True, exist_ok=True)
        self.run.links_state.unlink(missing_ok=True)
        write_json(self.run.links_config, config, indent=1)
        log = self.run.log(PROXY)
        self.procs.spawn(PROXY, [sys.executable, "-m", "harness.controller.linkproxy",
                                 str(self.run.links_config)], log, tie_to_controller=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.run.links_state.exists():
            if self.procs.pid(PROXY) is None:
                raise HarnessError(f"the link layer's proxy exited at start: {last_lines(log)}")
            if time.monotonic() > deadline:
                raise HarnessError(f"the link layer's proxy did not start in {START_TIMEOUT:.0f}"
                                   f" s; see {log}")
            time.sleep(0.02)
        state = json.loads(self.run.links_state.read_text())
        self.bound = {k: (str(v[0]), int(v[1])) for k, v in state["routes"].items()}
        self._control = (str(state["control"][0]), int(state["control"][1]))

    def stop(self) -> None:
        with self._mu:
            self._close()
        self.procs.stop(PROXY, timeout=3)

    def running(self) -> bool:
        return self.procs.pid(PROXY) is not None

    def _close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._file = None

    def command(self, **cmd: Any) -> dict[str, Any]:
        """One command to the proxy, one reply (HarnessError if it fails)."""
        with self._mu:
            for attempt in (1, 2):
                try:
                    if self._sock is None:
                        self._sock = socket.create_connection(self._control, CONTROL_TIMEOUT)
                        self._file = self._sock.makefile("rw", encoding="utf-8")
                    self._file.write(json.dumps(cmd) + "\n")
                    self._file.flush()
                    line = self._file.readline()
                    if not line:
                        raise OSError("the proxy closed its control connection")
                    break
                except OSError as e:
                    self._close()
                    if attempt == 2:
                        raise HarnessError(f"the link layer's proxy does not answer: {e}; see "
                                           f"{self.run.log(PROXY)}") from None
        reply = json.loads(line)
        if not reply.get("ok"):
            raise HarnessError(f"the link layer refused {cmd.get('op')}: {reply.get('error')}")
        return dict(reply)

    # what a client is told ----------------------------------------------------------------------
    def listener(self, process: int, name: str) -> tuple[str, int] | None:
        route = self.by_client.get(process, {}).get(name)
        return None if route is None else self.bound[route.id]

    def client_endpoint(self, process: int, endpoint: Mapping[str, Any]) -> dict[str, Any]:
        """A DB endpoint as client ``process`` is to reach it (its listener), or as it was."""
        found = self.listener(process, str(endpoint.get("name")))
        if found is None:
            return dict(endpoint)
        return {**endpoint, "host": found[0], "port": found[1]}

    def client_options(self, process: int, options: Any) -> Any:
        """Lock options with every routed endpoint (``{"name", "host", "port"}``) replaced by
        the client's listener for it."""
        if isinstance(options, list):
            return [self.client_options(process, x) for x in options]
        if isinstance(options, dict):
            if {"name", "host", "port"} <= set(options) and options["name"] in self.targets:
                return self.client_endpoint(process, options)
            return {k: self.client_options(process, v) for k, v in options.items()}
        return options

    def redirects(self, process: int) -> dict[str, str]:
        """``host:port`` -> ``host:port``: each routed endpoint's own address (and its door)
        to the client's listener for it, for the connections its library makes by itself."""
        out: dict[str, str] = {}
        for name, node in self.targets.items():
            found = self.listener(process, name)
            if found is None:
                continue
            to = f"{found[0]}:{found[1]}"
            out[f"{node.host}:{node.port}"] = to
            door = self.door_hosts.get(node.host)
            if door is not None:
                out[f"{door}:{node.port}"] = to
        return out

    # LinkOps ------------------------------------------------------------------------------------
    def links(self, src: str | None = None, dst: str | None = None) -> list[str]:
        names = {r.id for r in self.routes if r.src is not None}
        names |= set(self.peer_links())
        return sorted(n for n in names if (src is None or n.split(">")[0] == src)
                      and (dst is None or n.split(">")[1] == dst))

    def peer_links(self) -> list[str]:
        nodes = sorted({node for node, _ in self.doors})
        return [link_name(a, b) for a in nodes for b in nodes if a != b]

    def shape(self, links: Iterable[str], owner: str, *, delay: float = 0.0,
              jitter: float = 0.0, rate: float = 0.0, close_delay: float = 0.0,
              direction: str = "both") -> None:
        self.command(op="shape", links=list(links), owner=owner, delay=delay, jitter=jitter,
                     rate=rate, close_delay=close_delay, direction=direction)

    def unshape(self, owner: str, links: Iterable[str] | None = None) -> None:
        self.command(op="unshape", owner=owner, links=None if links is None else list(links))

    def stall(self, links: Iterable[str], seconds: float, *, direction: str = "down",
              trigger: str = "now", after: Iterable[str] | None = None,
              groups: Iterable[Iterable[str]] | None = None) -> None:
        self.command(op="stall", links=list(links), seconds=seconds, direction=direction,
                     trigger=trigger, after=None if after is None else list(after),
                     groups=None if groups is None else [list(g) for g in groups])

    def unstall(self, links: Iterable[str] | None = None) -> None:
        self.command(op="unstall", links=None if links is None else list(links))

    def reset(self, links: Iterable[str]) -> int:
        return int(self.command(op="reset", links=list(links)).get("reset", 0))

    def stats(self, links: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        reply = self.command(op="stats", links=None if links is None else list(links))
        return dict(reply["links"])

    def record(self) -> dict[str, Any]:
        """What test.json keeps: each route and the address it was bound to."""
        return {"routes": [{**asdict(r), "bound": list(self.bound.get(r.id, r.listen))}
                           for r in self.routes]}
