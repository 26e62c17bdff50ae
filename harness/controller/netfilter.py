"""iptables rules for partitions, kept in the project's own chains.

Every rule lives in the chain ``LOCK-HARNESS`` (jumped to from INPUT) and carries the comment
``lock-harness:<run-id>``, so a run removes exactly its own rules, and ``harness clean`` those of
runs that are gone. Loopback traffic passes INPUT on the way in, so dropping ``-s A -d B`` there
cuts A off from B even though both are addresses of this machine.

Servers that dial each other (a ZooKeeper ensemble, an etcd cluster) do not bind their outgoing
sockets: the kernel gives a connection to 127.x.y.z the source 127.0.0.1, whoever makes it, and
``-s A`` would never match. So, for runs with partitions, each server process runs with a group
id of its own (:func:`node_gid`) and a rule in the nat chain ``LOCK-HARNESS-SNAT`` (jumped to
from POSTROUTING) rewrites the source of its connections to its node's address. The replies of
such a connection come back addressed to 127.0.0.1, so a cut also drops by the connection's
reply tuple (conntrack): every connection A made to B, both ways, silently (a DROP in INPUT, so
a cut-off process sees timeouts, as on a real network, not errors).

A one-way cut (:meth:`Netfilter.drop_oneway`) drops only what A sends B: A's packets to B, and
A's replies on the connections B made to A (matched by their reply tuple). Packet loss is the
same match with ``-m statistic --mode random --probability P`` and the same comment: the
``statistic`` match is what tells loss from cuts (healing a cut leaves the loss and healing the
loss leaves the cuts), and the comment stays the run id alone, which every version of ``harness
clean`` reads as the run's (a tag in it would make an older ``clean`` take a live run's loss
rules for a dead run's).

Rules are added, and removed, in one ``iptables-restore`` transaction per batch.

The same rules, chain and comment serve a network namespace of the run's own (a docker node's:
``Netfilter(run_id, netns=...)``, jumped to from INPUT and OUTPUT, as the node is both ends of
its links): the backend says only in which namespace they live.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator

from harness.controller.places import active_dir
from harness.core.errors import HarnessError

CHAIN = "LOCK-HARNESS"
NAT_CHAIN = "LOCK-HARNESS-SNAT"
COMMENT_PREFIX = "lock-harness:"
GID_BASE = 1_600_000_000  # + the low 24 bits of a node's address: one group id per address
LOSS = "-m statistic"  # what a loss rule has and a cut does not


def _command(name: str, netns: str | None) -> list[str]:
    """``name`` (iptables or iptables-restore) to run here, or in the network namespace
    ``netns`` (a path such as ``/proc/<pid>/ns/net``)."""
    binary = shutil.which(name)
    if binary is None:
        raise HarnessError(f"{name} not found: run the set-up command `bash setup.sh`")
    if netns is None:
        return [binary, "-w", "5"]
    return [shutil.which("nsenter") or "nsenter", f"--net={netns}", binary, "-w", "5"]


def _iptables(*args: str, check: bool = True, netns: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*_command("iptables", netns), *args], capture_output=True,
                          text=True, timeout=30)
    if check and proc.returncode != 0:
        raise HarnessError(f"iptables {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def check_available() -> None:
    """Partitions need root and a working iptables: say so in one line if not."""
    if os.geteuid() != 0:
        raise HarnessError("partitions need root (iptables): run as root, or pick another "
                           "--nemesis")
    proc = _iptables("-S", "INPUT", check=False)
    if proc.returncode != 0:
        raise HarnessError(f"iptables does not work here: {proc.stderr.strip()}")


def rules(table: str = "filter", netns: str | None = None) -> list[str]:
    """Our chain's rules as ``-A ...`` lines (empty when the chain does not exist)."""
    proc = _iptables("-t", table, "-S", _chain(table), check=False, netns=netns)
    if proc.returncode != 0:
        return []
    return [line for line in proc.stdout.splitlines() if line.startswith("-A ")]


def _chain(table: str) -> str:
    return NAT_CHAIN if table == "nat" else CHAIN


def node_gid(address: str) -> int:
    """The group id a server at ``address`` runs with when its source address is rewritten."""
    return GID_BASE + (int(ipaddress.IPv4Address(address)) & 0xFFFFFF)


def _comment_of(rule: str) -> str | None:
    marker = f'--comment "{COMMENT_PREFIX}'
    if marker in rule:
        return rule.split(marker, 1)[1].split('"', 1)[0]
    marker = f"--comment {COMMENT_PREFIX}"
    if marker in rule:
        return rule.split(marker, 1)[1].split()[0]
    return None


def drop_rule(comment: str, *match: str, probability: float | None = None) -> list[str]:
    """A rule that drops what ``match`` matches, with the run's ``comment``; with
    ``probability``, each such packet with that probability (loss)."""
    chance: list[str] = []
    if probability is not None:
        chance = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.6f}"]
    return [*match, *chance, "-m", "comment", "--comment", comment, "-j", "DROP"]


class Netfilter:
    """One run's rules: on this machine, or in a network namespace of the run's own
    (``netns``, whose ``hooks`` jump to the chain)."""

    def __init__(self, run_id: str, netns: str | None = None,
                 hooks: tuple[str, ...] = ("INPUT",)) -> None:
        self.run_id = run_id.replace("/", ":")
        self.comment = COMMENT_PREFIX + self.run_id
        self.netns = netns
        self.hooks = hooks

    def ensure_chain(self) -> None:
        if _iptables("-S", CHAIN, check=False, netns=self.netns).returncode != 0:
            # another run may create it at the same time
            _iptables("-N", CHAIN, check=False, netns=self.netns)
        self.ensure_jump()

    def ensure_jump(self) -> None:
        """Each hook jumps to our chain (exactly once)."""
        for hook in self.hooks:
            if _iptables("-C", hook, "-j", CHAIN, check=False, netns=self.netns).returncode:
                _iptables("-I", hook, "1", "-j", CHAIN, netns=self.netns)

    def drop(self, src: str, dst: str) -> None:
        """Drop what ``src`` sends ``dst``, and every connection ``src`` made to ``dst``."""
        self.apply(self.drop_rules(src, dst))

    def drop_rules(self, src: str, dst: str) -> list[list[str]]:
        return [drop_rule(self.comment, "-s", src, "-d", dst),
                drop_rule(self.comment, "-m", "conntrack", "--ctreplsrc", dst,
                          "--ctrepldst", src)]

    def drop_oneway(self, src: str, dst: str, probability: float | None = None) -> None:
        self.apply(self.oneway_rules(src, dst, probability))

    def oneway_rules(self, src: str, dst: str, probability: float | None = None
                     ) -> list[list[str]]:
        """Drop what ``src`` sends ``dst`` and nothing else: its packets to ``dst`` and its
        replies on connections ``dst`` made to it (whose replies may be addressed to the
        rewritten source, so they are matched by the connection's reply tuple). With
        ``probability``, each such packet is dropped with that probability (loss)."""
        return [drop_rule(self.comment, "-s", src, "-d", dst, probability=probability),
                drop_rule(self.comment, "-m", "conntrack", "--ctdir", "REPLY", "--ctreplsrc",
                          src, "--ctrepldst", dst, probability=probability)]

    def apply(self, rules: list[list[str]]) -> None:
        """Append rules to our chain all at once (one iptables-restore transaction: a
        partition of many links forms in one step, not one rule at a time)."""
        if not rules:
            return
        with chains_locked():  # harness clean may be removing an empty chain right now
            self.ensure_chain()
            restore(["*filter", *(f"-A {CHAIN} {' '.join(map(_word, r))}" for r in rules),
                     "COMMIT"], self.netns)
            self.ensure_jump()  # a run of older code may have removed it meanwhile (teardown)

    def dropped(self) -> int:
        """Packets this run's loss rules dropped so far (their counters)."""
        proc = _iptables("-S", CHAIN, "-v", check=False, netns=self.netns)
        total = 0
        for rule in proc.stdout.splitlines():
            if _comment_of(rule) == self.run_id and LOSS in rule and " -c " in rule:
                total += int(rule.split(" -c ", 1)[1].split()[0])
        return total

    def source_nat(self, address: str, dest: str = "127.0.0.0/8") -> int:
        """Make connections of processes in group :func:`node_gid` to ``dest`` come from
        ``address``; returns that group id. Stays until :meth:`teardown` (a heal leaves it)."""
        gid = node_gid(address)
        with chains_locked():
            if _iptables("-t", "nat", "-S", NAT_CHAIN, check=False).returncode != 0:
                _iptables("-t", "nat", "-N", NAT_CHAIN)
            if _iptables("-t", "nat", "-C", "POSTROUTING", "-j", NAT_CHAIN,
                         check=False).returncode != 0:
                _iptables("-t", "nat", "-I", "POSTROUTING", "1", "-j", NAT_CHAIN)
            _iptables("-t", "nat", "-A", NAT_CHAIN, "-d", dest, "-m", "owner",
                      "--gid-owner", str(gid), "-m", "comment", "--comment", self.comment,
                      "-j", "SNAT", "--to-source", address)
        return gid

    def heal(self) -> int:
        """Remove this run's cuts (not its loss). Returns how many rules were removed."""
        return remove_rules(lambda c: c == self.run_id, tables=("filter",),
                            where=lambda rule: LOSS not in rule, netns=self.netns)

    def heal_loss(self) -> int:
        return remove_rules(lambda c: c == self.run_id, tables=("filter",),
                            where=lambda rule: LOSS in rule, netns=self.netns)

    def teardown(self) -> None:
        """Remove this run's rules. The chains and their jumps stay: another run may be adding
        rules to them right now (removing the jump under it would make its cuts silently cut
        nothing); ``harness clean`` removes them when no run is live."""
        remove_rules(lambda c: c == self.run_id, netns=self.netns)


def _word(arg: str) -> str:
    """One argument as iptables-restore reads it: double quotes only (it knows no others)."""
    if arg and all(c.isalnum() or c in "-_.:/,=+" for c in arg):
        return arg
    if '"' in arg or "\\" in arg:
        raise HarnessError(f"iptables argument {arg!r} cannot be quoted for iptables-restore")
    return f'"{arg}"'


def restore(lines: list[str], netns: str | None = None) -> None:
    """One ``iptables-restore --noflush`` transaction (all or nothing)."""
    proc = subprocess.run([*_command("iptables-restore", netns), "--noflush"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=30)
    if proc.returncode != 0:
        raise HarnessError(f"iptables-restore failed: {proc.stderr.strip()[:300]}")


def remove_rules(select: Callable[[str], bool], tables: tuple[str, ...] = ("filter", "nat"),
                 where: Callable[[str], bool] | None = None, netns: str | None = None) -> int:
    """Delete our rules whose comment (the run id) ``select`` accepts, and (``where``) whose
    text it accepts: all of a table's in one transaction, or one by one if that fails (a rule
    gone meanwhile)."""
    n = 0
    for table in tables:
        chosen = [rule for rule in rules(table, netns)
                  if (owner := _comment_of(rule)) is not None and select(owner)
                  and (where is None or where(rule))]
        if not chosen:
            continue
        deletions = ["-D" + rule[2:] for rule in chosen]  # "-A CHAIN ..." -> "-D CHAIN ..."
        try:
            restore([f"*{table}", *deletions, "COMMIT"], netns)
            n += len(chosen)
            continue
        except HarnessError:
            pass
        for rule in chosen:
            args = [a.strip('"') for a in rule.split()[1:]]  # drop "-A"
            if _iptables("-t", table, "-D", *args, check=False, netns=netns).returncode == 0:
                n += 1
    return n


@contextlib.contextmanager
def chains_locked() -> Iterator[None]:
    """One run at a time makes or removes the project's chains (runs side by side share
    them): without it, one run's teardown can delete a chain between another's check that it
    exists and its jump to it."""
    fd = os.open(active_dir() / "iptables.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_chain_if_empty() -> bool:
    with chains_locked():
        return _remove_chains_if_empty()


def _remove_chains_if_empty() -> bool:
    removed = False
    for table, hook in (("filter", "INPUT"), ("nat", "POSTROUTING")):
        chain = _chain(table)
        if _iptables("-t", table, "-S", chain, check=False).returncode != 0 or rules(table):
            continue
        while _iptables("-t", table, "-D", hook, "-j", chain, check=False).returncode == 0:
            pass
        _iptables("-t", table, "-X", chain, check=False)
        removed = True
    return removed
