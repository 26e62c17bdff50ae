"""HOSTS.toml: the machines the ssh backend drives, read and validated before anything starts.

```toml
[defaults]                  # optional: what every host has unless it says otherwise
user = "root"               # (default root; another user needs passwordless sudo)
key = "keys/id_ed25519"     # private key (relative paths: from this file's directory)
known-hosts = "keys/known_hosts"   # optional; without it, ~/.ssh/known_hosts, new keys accepted
jump = "admin@bastion.example.com:22"   # optional jump host (or a table: address, user, port, key)

[[hosts]]                   # DB node n1 runs on the first host, n2 on the second, ...
address = "10.0.0.11"       # the host's IPv4 address on the test network: servers bind it,
                            # the other hosts and the clients reach it, iptables rules name it
ssh = "db1.example.com"     # optional: what ssh connects to (default: address)
port = 22
name = "db1"                # optional (default h1, h2, ...)

[resource]                  # optional: the host of the protected resource (a redis-server);
address = "10.0.0.20"       # without it, the resource runs on the control host

[clients]                   # optional: a source address of its own for each client
interface = "eth1"          # the control host's device on the test network (addresses are
addresses = "10.0.0.128/25" # added to it for the run); a list, a CIDR block or "A-B"
```

Every problem is one line naming the file, the entry and what to do; all of them are reported
at once (:class:`harness.core.errors.UsageError`, exit 64).
"""

from __future__ import annotations

import getpass
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.capabilities import (
    ClientLinks,
    Iptables,
    LinkLayer,
    PacketRules,
    PeerLinks,
    describe,
)
from harness.core.errors import UsageError
from harness.core.tomlfile import read_toml

HOST_KEYS = ("name", "address", "ssh", "port", "user", "key", "known-hosts", "jump", "dir")
DEFAULT_KEYS = tuple(k for k in HOST_KEYS if k not in ("name", "address", "ssh"))
TOP_KEYS = ("defaults", "hosts", "resource", "clients", "made-by")
JUMP_KEYS = ("address", "user", "port", "key")
CLIENT_KEYS = ("addresses", "interface")
DEFAULT_DIR = "/var/lib/lock-harness"
MAX_CLIENT_ADDRESSES = 4096


@dataclass(frozen=True)
class Jump:
    """A jump host (bastion): ssh reaches the host through it (``ssh -W``)."""

    address: str
    user: str
    port: int
    key: Path | None


@dataclass(frozen=True)
class Host:
    name: str
    address: str  # IPv4 on the test network
    ssh: str  # what ssh connects to
    port: int
    user: str
    key: Path | None
    known_hosts: Path | None
    jump: Jump | None
    dir: str  # where runs keep their files on the host

    @property
    def sudo(self) -> bool:
        return self.user != "root"

    def describe(self) -> str:
        port = f":{self.port}" if self.port != 22 else ""
        via = f" via {self.jump.user}@{self.jump.address}" if self.jump else ""
        return f"{self.name} ({self.user}@{self.ssh}{port}{via})"


@dataclass(frozen=True)
class ClientAddresses:
    addresses: tuple[str, ...]
    interface: str | None  # None: the addresses are configured on the control host already


@dataclass(frozen=True)
class HostsFile:
    path: Path
    hosts: tuple[Host, ...]
    resource: Host | None = None
    clients: ClientAddresses | None = None
    made_by: str | None = None  # the label of `harness hosts up`, if it wrote this file

    def every_host(self) -> list[Host]:
        return [*self.hosts, *([self.resource] if self.resource else [])]


class _Problems:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{self.path}: {where}{': ' if where else ''}{what}")

    def raise_any(self) -> None:
        if self.lines:
            raise UsageError("\n".join(self.lines))


def load(path: Path | str) -> HostsFile:
    """Read and check ``path``; UsageError with one line per problem."""
    path = Path(path)
    problems = _Problems(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file (write one, see docs/ssh.md, or make test "
                         "hosts with `harness hosts up 3`)")
    data = read_toml(path, "hosts file")
    base = path.resolve().parent
    for key in data:
        if key not in TOP_KEYS:
            problems.add("", f"unknown key {key!r}: use {', '.join(TOP_KEYS)}")
    defaults = _table(data.get("defaults", {}), "[defaults]", problems)
    for key in defaults:
        if key not in DEFAULT_KEYS:
            problems.add("[defaults]", f"unknown key {key!r}: use {', '.join(DEFAULT_KEYS)}")
    raw_hosts = data.get("hosts")
    hosts: list[Host] = []
    if not isinstance(raw_hosts, list) or not raw_hosts:
        problems.add("", "no [[hosts]]: list one table per machine, each with its address")
        raw_hosts = []
    for i, raw in enumerate(raw_hosts):
        where = f"[[hosts]] {i + 1}"
        host = _host(_table(raw, where, problems), defaults, where, f"h{i + 1}", base, problems)
        if host is not None:
            hosts.append(host)
    resource = None
    if "resource" in data:
        raw = _table(data["resource"], "[resource]", problems)
        resource = _host(raw, defaults, "[resource]", "resource", base, problems)
    _unique(hosts, resource, problems)
    clients = _clients(data.get("clients"), problems) if "clients" in data else None
    made_by = data.get("made-by", {}).get("label") if isinstance(data.get("made-by"), dict) \
        else None
    problems.raise_any()
    return HostsFile(path, tuple(hosts), resource, clients, made_by)


def _table(value: Any, where: str, problems: _Problems) -> dict[str, Any]:
    if not isinstance(value, dict):
        problems.add(where, "must be a table of KEY = VALUE")
        return {}
    return value


def _host(raw: dict[str, Any], defaults: dict[str, Any], where: str, default_name: str,
          base: Path, problems: _Problems) -> Host | None:
    for key in raw:
        if key not in HOST_KEYS:
            problems.add(where, f"unknown key {key!r}: use {', '.join(HOST_KEYS)}")
    merged = {**defaults, **raw}
    ok = True
    address = merged.get("address")
    if address is None:
        problems.add(where, "'address' is missing: give the host's IPv4 address on the test "
                     "network")
        ok = False
    elif not _is_ipv4(address):
        problems.add(where, f"address {address!r} is not an IPv4 address: servers bind it and "
                     "iptables rules name it (a DNS name goes in 'ssh')")
        ok = False
    name = merged.get("name", default_name)
    if not isinstance(name, str) or not name or not name.replace("-", "").isalnum():
        problems.add(where, f"name {name!r}: use letters, digits and '-'")
        ok = False
    ssh = merged.get("ssh", address)
    if "ssh" in merged and (not isinstance(ssh, str) or not ssh or ssh.startswith("-")):
        problems.add(where, f"ssh {ssh!r}: give a host name or address")
        ok = False
    port = _port(merged.get("port", 22), where, "port", problems)
    user = merged.get("user", "root")
    if not isinstance(user, str) or not user or user.startswith("-") or "@" in user:
        problems.add(where, f"user {user!r}: give a login name")
        ok = False
    key = _key(merged.get("key"), where, base, problems)
    known = _file(merged.get("known-hosts"), where, "known-hosts", base, problems)
    jump = _jump(merged.get("jump"), where, user, key, base, problems)
    directory = merged.get("dir", DEFAULT_DIR)
    if not isinstance(directory, str) or not directory.startswith("/") or directory == "/" \
            or any(c in directory for c in " \t\n'\"$`\\"):
        problems.add(where, f"dir {directory!r}: give an absolute path (no spaces or quotes)")
        ok = False
    if not ok or port is None:
        return None
    return Host(str(name), str(address), str(ssh), port, str(user), key, known, jump,
                str(directory).rstrip("/"))


def _is_ipv4(value: Any) -> bool:
    try:
        return isinstance(value, str) and ipaddress.ip_address(value).version == 4
    except ValueError:
        return False


def _port(value: Any, where: str, key: str, problems: _Problems) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        problems.add(where, f"{key} {value!r}: give a TCP port number")
        return None
    return value


def _file(value: Any, where: str, key: str, base: Path, problems: _Problems) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        problems.add(where, f"{key} {value!r}: give a file path")
        return None
    path = (base / Path(value).expanduser()).resolve()
    if not path.is_file():
        problems.add(where, f"{key} {value!r}: no such file ({path})")
        return None
    return path


def _key(value: Any, where: str, base: Path, problems: _Problems) -> Path | None:
    path = _file(value, where, "key", base, problems)
    if path is None:
        return None
    if not os.access(path, os.R_OK):
        problems.add(where, f"key {path}: not readable by {getpass.getuser()}")
        return None
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        problems.add(where, f"key {path} is open to others (mode {mode:04o}) and ssh refuses "
                     f"it: chmod 600 {path}")
        return None
    return path


def _jump(value: Any, where: str, user: Any, key: Path | None, base: Path,
          problems: _Problems) -> Jump | None:
    if value is None:
        return None
    if isinstance(value, str):
        login, _, hostport = value.rpartition("@")
        address, _, port_text = hostport.partition(":")
        if not address or address.startswith("-") or (port_text and not port_text.isdigit()):
            problems.add(where, f"jump {value!r}: use [user@]host[:port]")
            return None
        port = _port(int(port_text) if port_text else 22, where, "jump port", problems)
        if port is None:
            return None
        return Jump(address, login or str(user), port, key)
    if isinstance(value, dict):
        for k in value:
            if k not in JUMP_KEYS:
                problems.add(where, f"jump: unknown key {k!r}: use {', '.join(JUMP_KEYS)}")
        address = value.get("address")
        if not isinstance(address, str) or not address or address.startswith("-"):
            problems.add(where, "jump: 'address' is missing")
            return None
        port = _port(value.get("port", 22), where, "jump port", problems)
        jump_key = _key(value["key"], where, base, problems) if "key" in value else key
        if port is None:
            return None
        return Jump(address, str(value.get("user", user)), port, jump_key)
    problems.add(where, f"jump {value!r}: use \"[user@]host[:port]\" or a table")
    return None


def _unique(hosts: list[Host], resource: Host | None, problems: _Problems) -> None:
    seen: dict[str, str] = {}
    names: set[str] = set()
    for host in [*hosts, *([resource] if resource else [])]:
        if host.address in seen:
            problems.add(host.name, f"address {host.address} is also {seen[host.address]}'s: "
                         "one DB node (or the resource) per host")
        seen.setdefault(host.address, host.name)
        if host.name in names:
            problems.add(host.name, "two hosts have this name")
        names.add(host.name)


def _clients(value: Any, problems: _Problems) -> ClientAddresses | None:
    table = _table(value, "[clients]", problems)
    for key in table:
        if key not in CLIENT_KEYS:
            problems.add("[clients]", f"unknown key {key!r}: use {', '.join(CLIENT_KEYS)}")
    interface = table.get("interface")
    if interface is not None and (not isinstance(interface, str) or not interface
                                  or "/" in interface or " " in interface):
        problems.add("[clients]", f"interface {interface!r}: give a network device name")
        return None
    try:
        addresses = parse_addresses(table.get("addresses"))
    except ValueError as e:
        problems.add("[clients]", f"addresses: {e}")
        return None
    return ClientAddresses(tuple(addresses), interface)


def parse_addresses(value: Any) -> list[str]:
    """A list of IPv4 addresses, a CIDR block (its usable addresses) or a range "A-B"."""
    if isinstance(value, list):
        out = [str(v) for v in value]
    elif isinstance(value, str) and "-" in value:
        first, _, last = value.partition("-")
        try:
            lo, hi = ipaddress.IPv4Address(first.strip()), ipaddress.IPv4Address(last.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a range of IPv4 addresses (A-B)") from None
        if hi < lo or int(hi) - int(lo) >= MAX_CLIENT_ADDRESSES:
            raise ValueError(f"{value!r}: give A-B with A <= B, at most "
                             f"{MAX_CLIENT_ADDRESSES} addresses") from None
        out = [str(ipaddress.IPv4Address(n)) for n in range(int(lo), int(hi) + 1)]
    elif isinstance(value, str):
        try:
            net = ipaddress.IPv4Network(value, strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not an IPv4 CIDR block") from None
        out = [str(a) for _, a in zip(range(MAX_CLIENT_ADDRESSES), net.hosts(), strict=False)]
    else:
        raise ValueError("give a list of IPv4 addresses, a CIDR block or a range \"A-B\"")
    bad = [a for a in out if not _is_ipv4(a)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not an IPv4 address")
    if not out:
        raise ValueError("no addresses")
    return out


def environment_unmet(hosts: HostsFile, capability: type) -> str | None:
    """What the ssh backend lacks on these hosts (None: it has ``capability``). iptables is
    checked (and installed if missing) on each host when a run starts."""
    if capability is Iptables:
        return None
    if capability is ClientLinks:
        if hosts.clients is None:
            return (f"the clients share the control host's address ({hosts.path} has no "
                    "[clients] addresses), so one client cannot be cut off alone: add them "
                    "(docs/ssh.md)")
        return None
    if capability in (PacketRules, LinkLayer, PeerLinks):
        return (f"the ssh backend has no {describe(capability)} yet: use --backend local or "
                "docker")
    return f"the ssh backend has no {getattr(capability, '__name__', capability)}"


def check_fits(hosts: HostsFile, nodes: int, clients: int) -> None:
    """The run's size against the file: one line if it does not fit."""
    if nodes > len(hosts.hosts):
        raise UsageError(f"--nodes {nodes} needs {nodes} hosts, {hosts.path} lists "
                         f"{len(hosts.hosts)}: add hosts or lower --nodes")
    if hosts.clients is not None and clients > len(hosts.clients.addresses):
        raise UsageError(f"--clients {clients} needs {clients} client addresses, [clients] in "
                         f"{hosts.path} gives {len(hosts.clients.addresses)}")
