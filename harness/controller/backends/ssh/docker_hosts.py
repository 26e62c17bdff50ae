"""``harness hosts up N`` / ``harness hosts down``: plain SSH hosts to try the ssh backend on,
made of containers of the node image (it has openssh-server) on a Docker network of their own.

Each container runs sshd and nothing else (PID 1 is Docker's init, which reaps what the
servers' sessions leave behind), with NET_ADMIN so that iptables works inside it. The keys are
made here, for this set of hosts: a client key pair (``ssh-keygen``) whose public half is every
host's authorized key, and one host key per container, so that HOSTS.toml's known_hosts pins
each host (no trust on first use). From then on the harness reaches them only through SSH, as
it would reach VMs: nothing in this module is used by the ssh backend.

Files, beside each other: ``HOSTS.toml`` and ``HOSTS.keys/`` (``id_ed25519``, ``known_hosts``
and each host's seed). Docker objects carry the labels ``lock-harness=1`` and
``lock-harness.hosts=<id>`` (never ``lock-harness.run``: ``harness clean`` leaves a set of
hosts alone, ``harness hosts down`` removes it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import secrets
import shutil
import socket
import subprocess
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from harness.controller import cleanup
from harness.controller.backends import docker as docker_backend
from harness.controller.store import RunDir
from harness.core.errors import HarnessError, UsageError

HOSTS_LABEL = "lock-harness.hosts"
MAX_HOSTS = 16
SSH_WAIT = 30.0
BOOT = """set -e
install -d -m 700 /root/.ssh
install -m 600 /seed/authorized_keys /root/.ssh/authorized_keys
rm -f /etc/ssh/ssh_host_*
install -m 600 /seed/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key
install -m 644 /seed/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ed25519_key.pub
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e -o HostKey=/etc/ssh/ssh_host_ed25519_key \
  -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o UsePAM=no \
  -o UseDNS=no -o MaxSessions=64 -o MaxStartups=64:30:128
"""


def keys_dir(path: Path) -> Path:
    """Where the keys of the hosts that ``path`` describes live: HOSTS.toml -> HOSTS.keys/."""
    return path.with_suffix(".keys")


def _label_of(path: Path) -> str | None:
    """The ``[made-by]`` label of a hosts file written here (None: not ours, or unreadable)."""
    try:
        made_by = tomllib.loads(path.read_text()).get("made-by")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    label = made_by.get("label") if isinstance(made_by, dict) else None
    return label if isinstance(label, str) and label.startswith(HOSTS_LABEL + "=") else None


def _keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at ``path``; the public key's line."""
    proc = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                           "-f", str(path)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise HarnessError(f"ssh-keygen failed: {proc.stderr.strip()}")
    return path.with_name(path.name + ".pub").read_text().strip()


def up(count: int, path: Path, say: Callable[[str], None] = print) -> Path:
    """Start ``count`` SSH hosts and write ``path``; returns it."""
    if not 1 <= count <= MAX_HOSTS:
        raise UsageError(f"hosts up: give 1 to {MAX_HOSTS} hosts, got {count}")
    if shutil.which("ssh-keygen") is None or shutil.which("ssh") is None:
        raise HarnessError("ssh and ssh-keygen not found (Debian package openssh-client): run "
                           "`bash setup.sh`")
    path = path.absolute()
    c = docker_backend.client()
    if path.exists():
        label = _label_of(path)
        if label is None:
            raise UsageError(f"{path} exists and was not written by `harness hosts up`: "
                             "choose another --file")
        if c.containers.list(all=True, filters={"label": label}):
            raise UsageError(f"{path} describes hosts that are up: `harness hosts down "
                             f"--file {path}` first")
    image = docker_backend.ensure_image(c)
    ident = secrets.token_hex(4)
    labels = {docker_backend.LABEL: "1", HOSTS_LABEL: ident}
    started = time.monotonic()
    keys = keys_dir(path)
    shutil.rmtree(keys, ignore_errors=True)
    keys.mkdir(mode=0o700, parents=True)
    try:
        client_pub = _keygen(keys / "id_ed25519", f"lock-harness hosts {ident}")
        network = c.networks.create(f"lh-hosts-{ident}", driver="bridge", labels=labels)
        network.reload()
        containers, host_keys = [], []
        for i in range(1, count + 1):
            seed = keys / f"h{i}"
            seed.mkdir(mode=0o700)
            host_keys.append(_keygen(seed / "ssh_host_ed25519_key", f"h{i}"))
            (seed / "authorized_keys").write_text(client_pub + "\n")
            containers.append(c.containers.run(
                image, ["sh", "-c", BOOT], detach=True, name=f"lh-hosts-{ident}-h{i}",
                hostname=f"h{i}", labels={**labels, "lock-harness.host": f"h{i}"},
                cap_add=["NET_ADMIN"], network=network.name, init=True,
                volumes={str(seed): {"bind": "/seed", "mode": "ro"}}))
        addresses = []
        for ctr in containers:
            ctr.reload()
            addresses.append(ctr.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"])
        for ctr, addr in zip(containers, addresses, strict=True):
            wait_for_sshd(addr, ctr)
        (keys / "known_hosts").write_text("".join(
            f"{addr} {' '.join(key.split()[:2])}\n"
            for addr, key in zip(addresses, host_keys, strict=True)))
        subnet = ipaddress.IPv4Network(network.attrs["IPAM"]["Config"][0]["Subnet"])
        path.write_text(hosts_toml(count, ident, addresses, keys, path.parent,
                                   "br-" + network.id[:12], client_block(subnet)))
    except BaseException as e:
        docker_backend.remove_labelled(c, f"{HOSTS_LABEL}={ident}")
        shutil.rmtree(keys, ignore_errors=True)
        if isinstance(e, docker.errors.DockerException):
            raise HarnessError(f"hosts up: docker: {getattr(e, 'explanation', None) or e}"
                               ) from None
        raise
    say(f"hosts up: {count} SSH host(s) on network lh-hosts-{ident} "
        f"({', '.join(addresses)}) in {time.monotonic() - started:.1f} s; wrote {path}")
    return path


def wait_for_sshd(address: str, container: Any, timeout: float = SSH_WAIT) -> None:
    """Until sshd answers with its banner (the only thing looked at from outside)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, 22), 1) as s:
            s.settimeout(2)
            if s.recv(64).startswith(b"SSH-"):
                return
        time.sleep(0.1)
    container.reload()
    raise HarnessError(f"sshd did not answer on {address}:22 within {timeout:.0f} s "
                       f"(container {container.name} is {container.status}): "
                       f"{container.logs(tail=3).decode(errors='replace').strip()}")


def client_block(subnet: ipaddress.IPv4Network) -> str:
    """The clients' addresses: the top of the subnet (Docker gives containers the bottom)."""
    size = min(256, subnet.num_addresses // 2)
    prefix = 32 - (size.bit_length() - 1)
    top = ipaddress.IPv4Network(f"{subnet.broadcast_address}/{prefix}", strict=False)
    return str(top)


def hosts_toml(count: int, ident: str, addresses: list[str], keys: Path, base: Path,
               bridge: str, clients: str) -> str:
    def rel(p: Path) -> str:
        return json.dumps(str(p.relative_to(base)) if p.is_relative_to(base) else str(p))

    lines = [
        f"# Written by `harness hosts up {count}`: {count} containers of the node image on the",
        f"# Docker network lh-hosts-{ident}, reached only through SSH. `harness hosts down`",
        "# removes them, this file and its keys.",
        "",
        "[made-by]",
        f'command = "harness hosts up {count}"',
        f'label = "{HOSTS_LABEL}={ident}"',
        "",
        "[defaults]",
        'user = "root"',
        f"key = {rel(keys / 'id_ed25519')}",
        f"known-hosts = {rel(keys / 'known_hosts')}",
        "",
        "# each client connects from an address of its own on the network's bridge",
        "[clients]",
        f'interface = "{bridge}"',
        f'addresses = "{clients}"',
    ]
    for i, addr in enumerate(addresses, 1):
        lines += ["", "[[hosts]]", f'name = "h{i}"', f'address = "{addr}"']
    return "\n".join(lines) + "\n"


def runs_using(path: Path) -> list[str]:
    """Runs in progress on this machine whose spec names this hosts file."""
    target = str(path.resolve())
    out = []
    for _, data in cleanup.active_runs():
        try:
            spec = RunDir(Path(str(data.get("run_dir", "")))).load_test()["spec"]
        except HarnessError:
            continue
        if spec.get("hosts") == target:
            out.append(str(data.get("run_id", "?")))
    return out


def down(path: Path | None, every: bool = False, say: Callable[[str], None] = print) -> int:
    """Remove one set of hosts (the one ``path`` describes, and its files) or, with ``every``,
    all of them. Returns how many containers went."""
    c = docker_backend.client()
    if every:
        selector = HOSTS_LABEL
    else:
        assert path is not None
        if not path.exists():
            raise UsageError(f"{path}: no such file (name the hosts file with --file, or "
                             "remove every set with --all)")
        label = _label_of(path)
        if label is None:
            raise UsageError(f"{path} was not written by `harness hosts up`: nothing to remove")
        live = runs_using(path)
        if live:
            raise HarnessError(f"run {live[0]} is using the hosts of {path}: let it end (or "
                               "`harness clean --force`) first")
        selector = label
    containers, networks = docker_backend.remove_labelled(c, selector)
    if path is not None and _label_of(path) is not None:
        shutil.rmtree(keys_dir(path), ignore_errors=True)
        path.unlink(missing_ok=True)
    say(f"hosts down: {containers} container(s), {networks} network(s) removed"
        + (f"; {path} and {keys_dir(path)} deleted" if path is not None else ""))
    return containers
