"""The project's iptables rules (harness.controller.netfilter) in a network namespace of their
own, as the docker backend keeps them in each container's: one chain jumped to from INPUT and
OUTPUT, every rule with the run's comment, cuts healed apart from loss. A throwaway namespace
(``unshare --net``), so the host's rules are never touched."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from harness.controller import netfilter

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="iptables needs root"),
    pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("iptables")),
                       reason="unshare or iptables missing: run `bash setup.sh`")]


def test_a_drop_rule_carries_the_comment_and_loss_its_chance() -> None:
    assert netfilter.drop_rule("lock-harness:r1", "-s", "10.0.0.2") == [
        "-s", "10.0.0.2", "-m", "comment", "--comment", "lock-harness:r1", "-j", "DROP"]
    assert netfilter.drop_rule("c", "-d", "10.0.0.3", probability=0.25) == [
        "-d", "10.0.0.3", "-m", "statistic", "--mode", "random", "--probability", "0.250000",
        "-m", "comment", "--comment", "c", "-j", "DROP"]


@pytest.fixture
def netns() -> Iterator[str]:
    proc = subprocess.Popen(["unshare", "--net", "sleep", "60"])
    try:
        path = f"/proc/{proc.pid}/ns/net"
        for _ in range(200):  # until unshare has exec'd sleep in the new namespace
            if os.readlink(path) != os.readlink("/proc/self/ns/net"):
                break
            subprocess.run(["sleep", "0.01"], check=True)
        yield path
    finally:
        proc.kill()
        proc.wait()


def test_rules_in_a_namespace_heal_cuts_and_loss_apart(netns: str) -> None:
    net = netfilter.Netfilter("suite/run-1", netns=netns, hooks=("INPUT", "OUTPUT"))
    net.apply([netfilter.drop_rule(net.comment, "-s", "10.0.0.2"),
               netfilter.drop_rule(net.comment, "-d", "10.0.0.2", probability=0.5)])
    rules = netfilter.rules(netns=netns)
    assert len(rules) == 2
    assert all('--comment "lock-harness:suite:run-1"' in r or
               "--comment lock-harness:suite:run-1" in r for r in rules), rules
    for hook in ("INPUT", "OUTPUT"):
        jumps = subprocess.run(["nsenter", f"--net={netns}", "iptables", "-S", hook],
                               capture_output=True, text=True, check=True).stdout
        assert jumps.count(f"-j {netfilter.CHAIN}") == 1, jumps
    assert not [r for r in netfilter.rules() if "suite:run-1" in r]  # none on the host
    assert net.heal() == 1
    assert [netfilter.LOSS in r for r in netfilter.rules(netns=netns)] == [True]
    assert net.heal_loss() == 1
    assert netfilter.rules(netns=netns) == []
