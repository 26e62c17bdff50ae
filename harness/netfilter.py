"""iptables rules for partitions, kept in the project's own chain.

Every rule lives in the chain ``LOCK-HARNESS`` (jumped to from INPUT) and carries the comment
``lock-harness:<run-id>``, so a run removes exactly its own rules, and ``harness clean`` those of
runs that are gone. Loopback traffic passes INPUT on the way in, so dropping ``-s A -d B`` there
cuts A off from B even though both are addresses of this machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from harness.errors import HarnessError

CHAIN = "LOCK-HARNESS"
COMMENT_PREFIX = "lock-harness:"


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables")
    if binary is None:
        raise HarnessError("iptables not found: run the set-up command `bash setup.sh`")
    proc = subprocess.run([binary, "-w", "5", *args], capture_output=True, text=True,
                          timeout=30)
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


def rules() -> list[str]:
    """Our chain's rules as ``-A ...`` lines (empty when the chain does not exist)."""
    proc = _iptables("-S", CHAIN, check=False)
    if proc.returncode != 0:
        return []
    return [line for line in proc.stdout.splitlines() if line.startswith("-A ")]


def _comment_of(rule: str) -> str | None:
    marker = f'--comment "{COMMENT_PREFIX}'
    if marker in rule:
        return rule.split(marker, 1)[1].split('"', 1)[0]
    marker = f"--comment {COMMENT_PREFIX}"
    if marker in rule:
        return rule.split(marker, 1)[1].split()[0]
    return None


class Netfilter:
    """One run's rules."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id.replace("/", ":")
        self.comment = COMMENT_PREFIX + self.run_id

    def ensure_chain(self) -> None:
        if _iptables("-S", CHAIN, check=False).returncode != 0:
            _iptables("-N", CHAIN)
        if _iptables("-C", "INPUT", "-j", CHAIN, check=False).returncode != 0:
            _iptables("-I", "INPUT", "1", "-j", CHAIN)

    def drop(self, src: str, dst: str) -> None:
        self.ensure_chain()
        _iptables("-A", CHAIN, "-s", src, "-d", dst, "-m", "comment", "--comment",
                  self.comment, "-j", "DROP")

    def heal(self) -> int:
        """Remove this run's rules. Returns how many were removed."""
        return remove_rules(lambda c: c == self.run_id)

    def teardown(self) -> None:
        self.heal()
        remove_chain_if_empty()


def remove_rules(select: object) -> int:
    n = 0
    for rule in rules():
        owner = _comment_of(rule)
        if owner is not None and callable(select) and select(owner):
            spec = rule.split()[1:]  # drop "-A"
            args = [a.strip('"') for a in spec]
            if _iptables("-D", *args, check=False).returncode == 0:
                n += 1
    return n


def remove_chain_if_empty() -> bool:
    if _iptables("-S", CHAIN, check=False).returncode != 0:
        return False
    if rules():
        return False
    while _iptables("-D", "INPUT", "-j", CHAIN, check=False).returncode == 0:
        pass
    _iptables("-X", CHAIN, check=False)
    return True
