"""The command line is built for the one command asked for (harness/cli_parser.py `build_parser`):
the same answers as the whole parser, every command still listed, bad usage still exit 64."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.cli import COMMANDS
from harness.cli_parser import build_parser

SAMPLES = [
    ["run", "--db", "redis", "--nemesis", "pause", "--time-limit", "3", "--quiet"],
    ["explore", "--menu", "pause,kill", "--budget", "4", "--replays", "1"],
    ["check", "a.jsonl", "b.edn", "--model", "cas-register", "--time-limit", "5"],
    ["export", "results/x"],
    ["report", "results/x"],
    ["list", "--lock", "redis-setnx"],
    ["clean", "--force"],
    ["hosts", "up", "3", "--file", "H.toml"],
    ["hosts", "down", "--all"],
    ["serve", "--port", "0", "--quiet"],
    ["suite", "nightly.toml", "--shard", "1/4", "--dry-run"],
    ["doctor", "--db", "zookeeper", "--lock", "curator", "--nemesis", "pause"],
    ["setup", "--db", "redis", "--backend", "docker", "--clients", "--dry-run"],
    ["zoo", "--seeds", "1-3", "--libraries", "sherlock", "--faults", "none,pause", "--jobs", "2"],
]


def test_every_command_has_a_sample() -> None:
    assert {s[0] for s in SAMPLES} == set(COMMANDS)


@pytest.mark.parametrize("argv", SAMPLES, ids=[" ".join(s[:2]) for s in SAMPLES])
def test_the_parser_for_one_command_reads_it_as_the_whole_parser_does(argv: list[str]) -> None:
    assert vars(build_parser(argv[0]).parse_args(argv)) == vars(build_parser().parse_args(argv))


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; "
                           "sys.exit(main())", *args], capture_output=True, text=True,
                          timeout=60)


def test_help_lists_every_command() -> None:
    proc = harness("--help")
    assert proc.returncode == 0
    assert all(name in proc.stdout for name in COMMANDS)


def test_an_option_of_another_command_is_bad_usage_in_one_line() -> None:
    proc = harness("check", "a.jsonl", "--nemesis", "pause")
    assert proc.returncode == 64
    assert proc.stderr.count("\n") == 1 and "--nemesis" in proc.stderr


def test_run_help_lists_what_the_registry_has() -> None:
    """`run --help` names every db, lock, workload, nemesis, resource and checker the registry
    knows (builtins and installed plugins alike), read from it, and the exec:PATH lock."""
    from harness.controller.registry import default_registry

    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--help"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "10000"})
    assert proc.returncode == 0, proc.stderr
    helps = {line.split()[0]: line for line in proc.stdout.splitlines()
             if line.startswith("  --")}
    reg = default_registry()
    for flag, kind in (("--db", "dbs"), ("--lock", "locks"), ("--workload", "workloads"),
                       ("--nemesis", "nemeses"), ("--resource", "resources"),
                       ("--workload", "checkers")):
        listed = re.escape(", ".join(reg.names(kind)))
        assert re.search(rf" {listed}(?![\w-])", helps[flag]), (flag, helps[flag])
    assert "lock" in reg.names("workloads") and "exec:PATH" in helps["--lock"]
