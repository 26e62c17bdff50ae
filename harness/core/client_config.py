"""What one client process is told: written once as JSON by the controller (one file per
client, ``python -m workloads.client CONFIG.json``) and parsed once by the client. Every name
is resolved to a ``module:Class`` target already, so the client never needs the registry."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.core.cluster import Node

NUMBERS = {"int": int, "float": (int, float), "str": str}  # the scalar fields' JSON types


@dataclass(frozen=True)
class ClientConfig:
    process: int  # the client's number: its journal's process, its key, its address
    t0_ns: int  # the run's start (CLOCK_MONOTONIC ns): op times are counted from it
    end_ns: int  # when the load and the quiesce end: no acquire waits past it
    seed: int  # the run's seed
    source: str  # the client's own address: its connections leave from it
    networks: list[str]  # where it must connect from that address (CIDR blocks)
    redirects: dict[str, str]  # host:port -> host:port its library's own connections take
    journal: str  # the file it journals every op to
    crash_file: str  # where crash-client arms a crash at one of the lock's crash steps
    clock_file: str  # where it writes its clocks when asked (clock-client's read-back)
    lock_target: str  # module:Class of the lock
    lock_name: str  # the key it works on (lock, or lock-k with --keys)
    lock_options: dict[str, Any]  # every option the lock declares: the run's or its default
    harness_options: dict[str, Any]  # what the DB or the lock's entry adds (config.harness)
    ttl: float  # the lock's lease or session, seconds
    op_timeout: float  # seconds the lock waits for one reply
    nodes: tuple[Node, ...]  # the DB nodes as this client reaches them
    workload_target: str  # module:Class of the workload
    workload_options: dict[str, float]  # hold, think, acquire timeout as the run gives them
    resource: Node  # the protected resource's endpoint
    resource_target: str  # module:Class of the resource
    resource_mode: str  # plain | fenced | version | cas
    faults: bool  # the run sets faults up: they read who holds from the journals as written

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClientConfig:
        """The config a controller wrote; ValueError, one line, for a key missing or unknown
        or a number or name of the wrong type."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"client config: a JSON object expected, got {type(data).__name__}")
        declared = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(declared))
        missing = [name for name in declared if name not in data]
        if unknown or missing:
            what = f"unknown key {unknown[0]!r}" if unknown else f"missing key {missing[0]!r}"
            raise ValueError(f"client config: {what}")
        for name, kind in declared.items():
            want = NUMBERS.get(str(kind))
            if want is not None and (isinstance(data[name], bool)
                                     or not isinstance(data[name], want)):
                raise ValueError(f"client config: {name} must be {kind}, got {data[name]!r}")
        return cls(**{**data, "nodes": tuple(node(n) for n in data["nodes"]),
                      "resource": node(data["resource"])})


def node(endpoint: dict[str, Any]) -> Node:
    return Node(str(endpoint["name"]), str(endpoint["host"]), int(endpoint["port"]))
