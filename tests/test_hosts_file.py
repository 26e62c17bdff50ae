"""HOSTS.toml for the ssh backend: read, checked up front, one line per problem (exit 64)."""

from __future__ import annotations

import getpass
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.controller.backends.ssh.hosts import (
    check_fits,
    environment_unmet,
    load,
    parse_addresses,
)
from harness.controller.spec import TestSpec
from harness.core.capabilities import ClientLinks, Iptables
from harness.core.errors import UsageError
from tests.harness_runs import harness

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "id_test"
    path.write_text("not really a key\n")
    path.chmod(0o600)
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "HOSTS.toml"
    path.write_text(text)
    return path


def test_a_full_file_is_read_with_defaults_relative_paths_and_a_jump_host(
        tmp_path: Path, key: Path) -> None:
    path = write(tmp_path, """
[defaults]
user = "debian"
key = "id_test"
jump = "admin@bastion.example.com:2222"

[[hosts]]
address = "10.0.0.11"
ssh = "db1.example.com"

[[hosts]]
address = "10.0.0.12"
name = "db2"
user = "root"
port = 2200
jump = { address = "other-bastion", user = "ops" }

[resource]
address = "10.0.0.20"

[clients]
interface = "eth1"
addresses = "10.0.0.128-10.0.0.131"
""")
    hosts = load(path)
    h1, h2 = hosts.hosts
    assert (h1.name, h1.address, h1.ssh, h1.user, h1.port, h1.key) == (
        "h1", "10.0.0.11", "db1.example.com", "debian", 22, key)
    assert h1.sudo and not h2.sudo
    assert h1.jump is not None and (h1.jump.user, h1.jump.address, h1.jump.port) == (
        "admin", "bastion.example.com", 2222)
    assert h2.jump is not None and (h2.jump.user, h2.jump.address, h2.jump.key) == (
        "ops", "other-bastion", key)
    assert (h2.name, h2.ssh, h2.port) == ("db2", "10.0.0.12", 2200)
    assert hosts.resource is not None and hosts.resource.address == "10.0.0.20"
    assert hosts.clients is not None and hosts.clients.interface == "eth1"
    assert hosts.clients.addresses == ("10.0.0.128", "10.0.0.129", "10.0.0.130", "10.0.0.131")
    assert h1.dir == "/var/lib/lock-harness"


def test_every_problem_is_its_own_line(tmp_path: Path, key: Path) -> None:
    key.chmod(0o644)
    path = write(tmp_path, """
colour = "blue"
[defaults]
key = "id_test"
[[hosts]]
address = "db1.example.com"
[[hosts]]
port = 99999
[[hosts]]
address = "10.0.0.3"
jump = "-oProxyCommand=evil"
[[hosts]]
address = "10.0.0.3"
known-hosts = "missing_known_hosts"
[clients]
addresses = "10.0.0.x/24"
""")
    with pytest.raises(UsageError) as err:
        load(path)
    lines = str(err.value).splitlines()
    text = "\n".join(lines)
    assert all(line.startswith(f"{path}: ") for line in lines)
    for expected in ("unknown key 'colour'", "open to others (mode 0644)", "chmod 600",
                     "'db1.example.com' is not an IPv4 address", "'address' is missing",
                     "port 99999", "jump '-oProxyCommand=evil'", "is also h3's",
                     "missing_known_hosts", "not an IPv4 CIDR block"):
        assert expected in text, (expected, text)
    assert len(lines) >= 10


def test_the_cli_prints_each_problem_on_its_own_line_and_exits_64(tmp_path: Path) -> None:
    path = write(tmp_path, "[[hosts]]\naddress = 'nope'\n[[hosts]]\nuser = ''\n")
    proc = harness("run", "--backend", "ssh", "--hosts", str(path), "--nemesis", "none")
    assert proc.returncode == 64, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert all(line.startswith(f"harness: {path}: [[hosts]] ") for line in lines), lines


def test_missing_and_invalid_files_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="harness hosts up 3"):
        load(tmp_path / "nowhere.toml")
    with pytest.raises(UsageError, match="not valid TOML"):
        load(write(tmp_path, "[[hosts]\n"))
    with pytest.raises(UsageError, match=r"no \[\[hosts\]\]"):
        load(write(tmp_path, "[defaults]\nuser = 'root'\n"))


def test_ssh_and_hosts_go_together(tmp_path: Path) -> None:
    path = write(tmp_path, "[[hosts]]\naddress = '10.0.0.1'\n")
    with pytest.raises(UsageError, match="needs --hosts"):
        TestSpec(backend="ssh", nemesis=[]).validate()
    with pytest.raises(UsageError, match="--hosts is for --backend ssh"):
        TestSpec(backend="local", hosts=str(path), nemesis=[]).validate()
    spec = TestSpec(backend="ssh", hosts=str(path), nemesis=[]).validate()
    assert spec.hosts == str(path.resolve())
    with pytest.raises(UsageError, match="--nodes 3 needs 3 hosts"):
        TestSpec(backend="ssh", hosts=str(path), db="zookeeper", nemesis=[]).validate()


def test_cutting_one_client_needs_client_addresses(tmp_path: Path) -> None:
    bare = load(write(tmp_path, "[[hosts]]\naddress = '10.0.0.1'\n"))
    assert environment_unmet(bare, Iptables) is None
    assert "[clients]" in str(environment_unmet(bare, ClientLinks))
    with pytest.raises(UsageError, match="--nemesis partition: the clients share"):
        TestSpec(backend="ssh", hosts=str(bare.path), nemesis=["partition"]).validate()
    TestSpec(backend="ssh", hosts=str(bare.path), nemesis=["pause"]).validate()
    with_clients = load(write(tmp_path, "[[hosts]]\naddress = '10.0.0.1'\n[clients]\n"
                                        "addresses = ['10.0.0.100', '10.0.0.101']\n"))
    assert environment_unmet(with_clients, ClientLinks) is None
    check_fits(with_clients, 1, 2)
    with pytest.raises(UsageError, match="--clients 3 needs 3 client addresses"):
        check_fits(with_clients, 1, 3)


def test_client_addresses_from_a_list_a_block_or_a_range() -> None:
    assert parse_addresses(["10.1.1.1", "10.1.1.2"]) == ["10.1.1.1", "10.1.1.2"]
    assert parse_addresses("10.1.1.0/30") == ["10.1.1.1", "10.1.1.2"]
    assert parse_addresses("10.1.1.9-10.1.1.10") == ["10.1.1.9", "10.1.1.10"]
    for bad in ("10.1.1.9-10.1.1.1", "10.1.1.1-10.9.0.0", ["10.1.1.300"], 42):
        with pytest.raises(ValueError):
            parse_addresses(bad)


UNREADABLE = """
import json, sys
from harness.controller.backends.ssh.hosts import load
from harness.core.errors import UsageError
try:
    load(sys.argv[1])
    print(json.dumps(None))
except UsageError as e:
    print(json.dumps(str(e)))
"""


def load_as(user: str | None, path: Path) -> str | None:
    """load(path) in a child process run as ``user`` (None: as this one): its error or None."""
    proc = subprocess.run([sys.executable, "-c", UNREADABLE, str(path)], user=user,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_unreadable_key_is_named() -> None:
    """A key the harness's user cannot read is named up front. Root reads every file, so as
    root the harness is run as nobody, on a key nobody may not read, then on one it may."""
    user = "nobody" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="hosts-key-"))  # not under pytest's root-only tmp
    try:
        folder.chmod(0o755)
        path = write(folder, "[[hosts]]\naddress = '10.0.0.1'\nkey = 'id_test'\n")
        path.chmod(0o644)
        key = folder / "id_test"
        key.write_text("not really a key\n")
        key.chmod(0o000)
        who = user or getpass.getuser()
        assert load_as(user, path) == f"{path}: [[hosts]] 1: key {key}: not readable by {who}"
        key.chmod(0o600)
        if user is not None:
            os.chown(key, pwd.getpwnam(user).pw_uid, -1)
        assert load_as(user, path) is None  # the same file, readable: no problem
    finally:
        shutil.rmtree(folder)
