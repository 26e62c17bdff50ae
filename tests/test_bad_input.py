"""Bad input is one line and exit 64 before any server starts (issue 24, cases 7 and 8): a
table of bad flags, spec, hosts, suite and schedule TOML, replay files and plugin classes with
bad declarations. Every case runs with a PATH that holds no server binary and a store that
must stay empty: a case that got as far as starting a server would fail either way. Most run
in-process through ``harness.cli.main`` (the table is fast); a few through the real command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.core.errors import EXIT_UNKNOWN, EXIT_USAGE, UsageError
from tests.harness_runs import bounded

PLUGIN_MODULE = "bad_input_plugins"
PLUGINS = '''
from harness.core.locks import Grant
from harness.core.options import Option


class Base:
    def acquire(self, timeout):
        return Grant()

    def release(self, grant):
        return True


class NoneOption(Base):
    options = {"x": None}


class TupleOption(Base):
    options = {"x": (int, 1)}


class ListOptions(Base):
    options = [Option(int, 1)]


class ListType(Base):
    options = {"x": Option(list, [])}


class StrForInt(Base):
    options = {"x": Option(int, "3")}


class FloatForInt(Base):
    options = {"x": Option(int, 1.5)}


class StrForBool(Base):
    options = {"x": Option(bool, "yes")}


class StrForFloat(Base):
    options = {"x": Option(float, "fast")}


class IntForStr(Base):
    options = {"x": Option(str, 3)}


class BoolForInt(Base):
    options = {"x": Option(int, True)}


class NanDefault(Base):
    options = {"x": Option(float, float("nan"))}


class BelowMinimum(Base):
    options = {"x": Option(int, 5, minimum=10)}


class ChoiceNotTyped(Base):
    options = {"x": Option(str, "a", choices=("a", 2))}


class DefaultNotAChoice(Base):
    options = {"x": Option(str, "c", choices=("a", "b"))}


class EmptyName(Base):
    options = {"": Option(int, 1)}


class HelpNotText(Base):
    options = {"x": Option(int, 1, help=3)}


class TypoDefault(Base):
    workload_defaults = {"hold": 1.0}


class StrDefault(Base):
    workload_defaults = {"hold_min": "1"}


class NegativeDefault(Base):
    workload_defaults = {"hold_min": -1}


class HugeDefault(Base):
    workload_defaults = {"hold_max": 1e308}


class InfDefault(Base):
    workload_defaults = {"acquire_timeout": float("inf")}


class BoolDefault(Base):
    workload_defaults = {"think_max": True}


class MinOverMax(Base):
    workload_defaults = {"hold_min": 3.0, "hold_max": 1.0}


class ListDefaults(Base):
    workload_defaults = [("hold_min", 1.0)]


class ZeroReleaseTimeout(Base):
    workload_defaults = {"release_timeout": 0}


class ZeroPoll(Base):
    workload_defaults = {"held_poll": 0.0}


class ErrorNotAClass(Base):
    timeout_errors = (ValueError, 3)


class ErrorsNotATuple(Base):
    timeout_errors = ValueError


class ErrorNames(Base):
    timeout_errors = ("TimeoutError",)


class ErrorNotAnException(Base):
    timeout_errors = (object,)


class DbsAString(Base):
    dbs = "redis"


class CrashStepsNumbers(Base):
    crash_steps = (1, 2)


class SetupNotAMethod(Base):
    setup = 3


class AsyncSetupOnASyncLock(Base):
    async def setup(self):
        pass


class PlainSetupOnAnAsyncLock:
    def setup(self):
        pass

    async def acquire(self, timeout):
        return Grant()

    async def release(self, grant):
        return True


class NoRelease:
    def acquire(self, timeout):
        return Grant()


class BadNemesis:
    name = "bad-nemesis"
    options = {"x": None}

    def select(self, ctx, target=None):
        return None

    def start(self, ctx, targets):
        pass

    def stop(self, ctx, targets):
        pass

    def teardown(self, ctx):
        pass


class OldImport(Base):
    pass


def broken():
    from workloads.locks.base import Grant  # noqa: F401  the removed path
'''
OLD_IMPORT = "from workloads.locks.base import Grant\n\n\nclass OldLock:\n    pass\n"

BAD_LOCKS = {  # class -> what its one line must name (the field, and what is wrong)
    "NoneOption": "options: 'x' must be an Option",
    "TupleOption": "options: 'x' must be an Option",
    "ListOptions": "options: must be a dict",
    "ListType": "options: 'x': type 'list' is not one of",
    "StrForInt": "options: 'x': default '3' is not a int",
    "FloatForInt": "options: 'x': default 1.5 is not a int",
    "StrForBool": "options: 'x': default 'yes' is not a bool",
    "StrForFloat": "options: 'x': default 'fast' is not a float",
    "IntForStr": "options: 'x': default 3 is not a str",
    "BoolForInt": "options: 'x': default True is not a int",
    "NanDefault": "options: 'x': default nan is not a float",
    "BelowMinimum": "options: 'x': default 5: must be at least 10",
    "ChoiceNotTyped": "options: 'x': choice 2 is not a str",
    "DefaultNotAChoice": "options: 'x': default 'c': expected one of a, b",
    "EmptyName": "is not an option name",
    "HelpNotText": "options: 'x': help must be a string",
    "TypoDefault": "workload_defaults: unknown key 'hold'",
    "StrDefault": "workload_defaults: hold_min must be 0 to 3600 seconds",
    "NegativeDefault": "workload_defaults: hold_min must be 0 to 3600 seconds",
    "HugeDefault": "workload_defaults: hold_max must be 0 to 3600 seconds",
    "InfDefault": "workload_defaults: acquire_timeout must be 0 to 3600 seconds",
    "BoolDefault": "workload_defaults: think_max must be 0 to 3600 seconds",
    "MinOverMax": "workload_defaults: hold_min 3 is more than hold_max 1",
    "ListDefaults": "workload_defaults: must be a dict",
    "ZeroReleaseTimeout": "workload_defaults: release_timeout must be more than 0",
    "ZeroPoll": "workload_defaults: held_poll must be more than 0",
    "ErrorNotAClass": "timeout_errors: 3 is not an exception class",
    "ErrorsNotATuple": "timeout_errors: must be a tuple",
    "ErrorNames": "timeout_errors: 'TimeoutError' is not an exception class",
    "ErrorNotAnException": "timeout_errors: <class 'object'> is not an exception class",
    "DbsAString": "dbs: must be a tuple of names",
    "CrashStepsNumbers": "crash_steps: must be a tuple of names",
    "SetupNotAMethod": "setup: must be a method, got 3",
    "AsyncSetupOnASyncLock": "setup: must be a plain `def` like its acquire",
    "PlainSetupOnAnAsyncLock": "setup: must be `async def` like its acquire",
    "NoRelease": "has no release() method",
}


@dataclass(frozen=True)
class Case:
    """``argv`` of a harness command; ``files`` it needs (name -> bytes, written first);
    ``says``: what its one line must contain."""

    id: str
    argv: tuple[str, ...]
    says: str
    files: tuple[tuple[str, bytes], ...] = ()


def toml(text: str) -> bytes:
    return text.encode()


DEEP_ARRAY = b"a = " + b"[" * 1000 + b"]" * 1000 + b"\n"
DEEP_TABLE = b"a = " + b"{b = " * 200 + b"1" + b"}" * 200 + b"\n"
LONG_NUMBER = b"seed = " + b"9" * 5000 + b"\n"
WIDE_NUMBER = b"seed = 99999999999999999999\n"
NOT_UTF8 = b"time-limit = 5\n\xff\xfe = 1\n"
LATIN1 = "name = \"caf\xe9\"\n".encode("latin-1")
HUGE = b"# " + b"x" * (1 << 20) + b"\n"
NUL = b"time-limit = 5\x00\n"
# What every kind of TOML file does wrong at the reading: (id, bytes, what the line says).
READ_ERRORS = (
    ("not-utf8", NOT_UTF8, "is not UTF-8 text (byte 16, line 2"),
    ("latin1", LATIN1, "is not UTF-8 text"),
    ("deep-array", DEEP_ARRAY, "nested too deep"),
    ("deep-table", DEEP_TABLE, "nested"),
    ("5000-digits", LONG_NUMBER, "outside TOML's 64-bit range"),
    ("20-digits", WIDE_NUMBER, "outside TOML's 64-bit range"),
    ("over-1mib", HUGE, "is larger than 1 MiB"),
    ("nul-byte", NUL, "is not valid TOML"),
    ("bad-syntax", b"time-limit = = 5\n", "is not valid TOML"),
    ("unclosed-table", b"[lock\nname = 1\n", "is not valid TOML"),
)


def run_argv(*flags: str) -> tuple[str, ...]:
    return ("run", "--lock", "redis-setnx", *flags)


FLAG_CASES = [
    Case("time-limit-zero", run_argv("--time-limit", "0"), "--time-limit must be a positive"),
    Case("time-limit-negative", run_argv("--time-limit", "-1"), "--time-limit must be"),
    Case("time-limit-nan", run_argv("--time-limit", "nan"),
         "'time-limit' must be a finite number"),
    Case("time-limit-inf", run_argv("--time-limit", "inf"),
         "'time-limit' must be a finite number"),
    Case("time-limit-1e308", run_argv("--time-limit", "1e308"),
         "--time-limit must be at most 86400"),
    Case("time-limit-a-day-and-a-second", run_argv("--time-limit", "86401"),
         "--time-limit must be at most 86400"),
    Case("time-limit-word", run_argv("--time-limit", "soon"), "invalid float value"),
    Case("clients-zero", run_argv("--clients", "0"), "--clients must be a positive integer"),
    Case("clients-negative", run_argv("--clients", "-3"), "--clients must be"),
    Case("clients-201", run_argv("--clients", "201"), "--clients must be at most 200"),
    Case("clients-float", run_argv("--clients", "2.5"), "invalid int value"),
    Case("nodes-zero", run_argv("--nodes", "0"), "--nodes must be a positive integer"),
    Case("nodes-ten", run_argv("--nodes", "10"), "--nodes must be at most 9"),
    Case("ttl-zero", run_argv("--ttl", "0"), "--ttl must be a positive"),
    Case("ttl-nan", run_argv("--ttl", "nan"), "'ttl' must be a finite number"),
    Case("ttl-1e308", run_argv("--ttl", "1e308"), "--ttl must be at most 3600"),
    Case("hold-1e308", run_argv("--hold", "1e308", "--nemesis", "none"),
         "--hold must be at most 3600 seconds"),
    Case("hold-range-1e308", run_argv("--hold", "1-1e308"), "--hold must be at most 3600"),
    Case("hold-negative", run_argv("--hold=-1"), "--hold must be seconds"),
    Case("hold-backwards", run_argv("--hold", "5-1"), "MIN <= MAX"),
    Case("hold-words", run_argv("--hold", "a-b"), "--hold must be seconds, or a range"),
    Case("hold-nan", run_argv("--hold", "nan"), "--hold must be seconds >= 0"),
    Case("hold-inf", run_argv("--hold", "inf"), "--hold must be seconds >= 0"),
    Case("think-1e308", run_argv("--think", "1e308"), "--think must be at most 3600"),
    Case("think-negative", run_argv("--think=-0.5"), "--think must be seconds"),
    Case("acquire-timeout-zero", run_argv("--acquire-timeout", "0"),
         "--acquire-timeout must be a positive"),
    Case("acquire-timeout-1e9", run_argv("--acquire-timeout", "1e9"),
         "--acquire-timeout must be at most 3600"),
    Case("acquire-timeout-nan", run_argv("--acquire-timeout", "nan"),
         "'acquire-timeout' must be a finite number"),
    Case("op-timeout-zero", run_argv("--op-timeout", "0"), "--op-timeout must be a positive"),
    Case("op-timeout-1e308", run_argv("--op-timeout", "1e308"),
         "--op-timeout must be at most 3600"),
    Case("keys-zero", run_argv("--keys", "0"), "--keys must be a positive integer"),
    Case("keys-over-clients", run_argv("--keys", "6"), "--keys must be at most 5"),
    Case("seed-negative", run_argv("--seed", "-1"), "--seed must be an integer from 0"),
    Case("seed-2-to-the-64", run_argv("--seed", str(2**64)), "--seed must be an integer"),
    Case("unknown-lock", ("run", "--lock", "no-such-lock"), "unknown lock 'no-such-lock'"),
    Case("unknown-db", run_argv("--db", "nodb"), "unknown db 'nodb'"),
    Case("unknown-workload", run_argv("--workload", "nowork"), "unknown workload 'nowork'"),
    Case("unknown-backend", run_argv("--backend", "cloud"), "cloud"),
    Case("unknown-persistence", run_argv("--persistence", "forever"), "--persistence"),
    Case("unknown-links", run_argv("--links", "carrier-pigeon"), "--links"),
    Case("unknown-resource", run_argv("--resource", "nores"), "unknown resource 'nores'"),
    Case("unknown-resource-mode", run_argv("--resource-mode", "magic"), "--resource-mode"),
    Case("lock-wrong-db", ("run", "--lock", "zookeeper", "--db", "redis"),
         "lock 'zookeeper' runs on --db zookeeper"),
    Case("nemesis-empty", run_argv("--nemesis", ","), "--nemesis is empty"),
    Case("nemesis-unknown", run_argv("--nemesis", "earthquake"), "unknown nemesis 'earthquake'"),
    Case("nemesis-role-nobody", run_argv("--nemesis", "pause:nobody"),
         "--nemesis pause:nobody: unknown target 'nobody'"),
    Case("nemesis-role-typo", run_argv("--nemesis", "partition:holdr"),
         "unknown target 'holdr'"),
    Case("nemesis-client-99", run_argv("--nemesis", "client:99"),
         "--nemesis client:99: unknown nemesis 'client'"),
    Case("nemesis-crash-client-99", run_argv("--nemesis", "crash-client:client=99"),
         "no client '99' in this run (clients 0 to 4"),
    Case("nemesis-pause-client-5", run_argv("--nemesis", "pause:client=5"),
         "no client '5' in this run"),
    Case("nemesis-pause-client-word", run_argv("--nemesis", "pause:client=two"),
         "no client 'two' in this run"),
    Case("nemesis-kill-n9", ("run", "--db", "redis-masters", "--lock", "redlock",
                             "--nodes", "3", "--nemesis", "kill:node=n9"),
         "no DB node 'n9' in this run (nodes: n1, n2, n3)"),
    Case("nemesis-kill-n0", run_argv("--nemesis", "kill:node=n0"), "no DB node 'n0'"),
    Case("nemesis-wrong-role", run_argv("--nemesis", "kill:holder"), "cannot target"),
    Case("nemesis-opt-no-equals", run_argv("--nemesis-opt", "clock-offset"),
         "expected KEY=VALUE"),
    Case("nemesis-opt-no-key", run_argv("--nemesis-opt", "=3"), "expected KEY=VALUE"),
    Case("nemesis-opt-unknown", run_argv("--nemesis", "pause", "--nemesis-opt", "x=1"),
         "not an option of the nemeses of this run"),
    Case("nemesis-opt-not-a-number", run_argv("--nemesis", "clock", "--nemesis-opt",
                                              "clock-offset=far"), "clock-offset="),
    Case("nemesis-opt-nan", run_argv("--nemesis", "clock", "--nemesis-opt",
                                     "clock-offset=nan"), "expected a finite number"),
    Case("lock-opt-unknown", run_argv("--lock-opt", "x=1"), "not an option of lock"),
    Case("lock-opt-no-equals", run_argv("--lock-opt", "x"), "expected KEY=VALUE"),
    Case("hosts-without-ssh", run_argv("--hosts", "h.toml"), "--hosts is for --backend ssh"),
    Case("ssh-without-hosts", run_argv("--backend", "ssh"), "--backend ssh needs --hosts"),
    Case("config-missing", run_argv("--config", "nowhere.toml"), "no such file"),
    Case("config-a-directory", run_argv("--config", "."), "a directory, not a TOML file"),
    Case("replay-missing", run_argv("--replay", "nowhere"), "no such run directory"),
    Case("unknown-flag", run_argv("--time-limt", "5"), "unrecognized arguments"),
    Case("unknown-command", ("rnu",), "invalid choice"),
    Case("check-time-limit-zero", ("check", "x.jsonl", "--time-limit", "0"),
         "--time-limit must be a positive", (("x.jsonl", b"{}\n"),)),
    Case("check-time-limit-inf", ("check", "x.jsonl", "--time-limit", "inf"),
         "--time-limit must be a positive", (("x.jsonl", b"{}\n"),)),
    Case("check-max-memory-small", ("check", "x.jsonl", "--max-memory", "1k"),
         "--max-memory '1k': give at least 64M", (("x.jsonl", b"{}\n"),)),
    Case("check-max-memory-word", ("check", "x.jsonl", "--max-memory", "lots"),
         "--max-memory 'lots'", (("x.jsonl", b"{}\n"),)),
    Case("serve-port", ("serve", "--port", "70000"), "--port 70000"),
    *(Case(f"explore-{id}", ("explore", "--lock", "redis-setnx", "--menu", menu, *flags), says)
      for id, menu, flags, says in (
          ("budget-zero", "pause", ("--budget", "0"), "--budget must be at least 1 run"),
          ("replays-zero", "pause", ("--budget", "1", "--replays", "0"), "--replays must be"),
          ("max-steps-zero", "pause", ("--budget", "1", "--max-steps", "0"),
           "--max-steps must be 1 to 50"),
          ("menu-none", "none", ("--budget", "1"), "--menu none: name the faults"),
          ("menu-role-nobody", "pause:nobody", ("--budget", "1"), "unknown target 'nobody'"),
          ("time-limit-1e308", "pause", ("--budget", "1", "--time-limit", "1e308"),
           "--time-limit must be at most 86400"))),
]


def config_case(id: str, text: str, says: str, *flags: str) -> Case:
    return Case(f"config-{id}", ("run", "--config", "spec.toml", *flags), says,
                (("spec.toml", toml(text)),))


CONFIG_CASES = [
    *(Case(f"config-named-{id}", ("run", "--config", "spec.toml"), "harness: spec spec.toml",
           (("spec.toml", data),)) for id, data, _ in READ_ERRORS),
    *(Case(f"config-says-{id}", ("run", "--config", "spec.toml"), says, (("spec.toml", data),))
      for id, data, says in READ_ERRORS),
    config_case("unknown-key", "time-limt = 5\n", "unknown spec key 'time_limt'"),
    config_case("time-limit-string", "time-limit = \"5\"\n", "'time-limit' must be a finite"),
    config_case("time-limit-inf", "time-limit = inf\n", "'time-limit' must be a finite"),
    config_case("time-limit-nan", "time-limit = nan\n", "'time-limit' must be a finite"),
    config_case("time-limit-1e308", "time-limit = 1e308\n", "--time-limit must be at most"),
    config_case("time-limit-bool", "time-limit = true\n", "'time-limit' must be a finite"),
    config_case("clients-float", "clients = 1.5\n", "'clients' must be an integer"),
    config_case("clients-bool", "clients = true\n", "'clients' must be an integer"),
    config_case("clients-huge", "clients = 100000\n", "--clients must be at most 200"),
    config_case("nodes-negative", "nodes = -1\n", "--nodes must be a positive integer"),
    config_case("seed-negative", "seed = -1\n", "--seed must be an integer from 0"),
    config_case("seed-string", "seed = \"one\"\n", "'seed' must be an integer"),
    config_case("nemesis-number", "nemesis = 3\n", "'nemesis' must be a name"),
    config_case("nemesis-list-of-numbers", "nemesis = [1, 2]\n", "'nemesis' must be a name"),
    config_case("nemesis-role-nobody", "nemesis = [\"pause:nobody\"]\n",
                "unknown target 'nobody'"),
    config_case("nemesis-client-99", "nemesis = [\"crash-client:client=99\"]\n",
                "no client '99' in this run"),
    config_case("lock-options-number", "lock-options = 3\n", "'lock-options' must be a table"),
    config_case("lock-table-without-name", "[lock]\nexpire = 1\n", "needs name ="),
    config_case("lock-table-name-number", "[lock]\nname = 3\n", "needs name ="),
    config_case("hold-bool", "hold = true\n", "'hold' must be seconds"),
    config_case("hold-table", "hold = {a = 1}\n", "'hold' must be seconds"),
    config_case("hold-1e308", "hold = 1e308\n", "--hold must be at most 3600"),
    config_case("hold-list-1e308", "hold = [1, 1e308]\n", "--hold must be at most 3600"),
    config_case("think-inf", "think = inf\n", "--think must be seconds >= 0"),
    config_case("ttl-1e308", "ttl = 1e308\n", "--ttl must be at most 3600"),
    config_case("quiesce-negative", "quiesce = -1\n", "--quiesce must be 0 to 3600"),
    config_case("quiesce-1e308", "quiesce = 1e308\n", "--quiesce must be 0 to 3600"),
    config_case("op-timeout-1e308", "op-timeout = 1e308\n", "--op-timeout must be at most"),
    config_case("name-empty", "name = \"\"\n", "'name' must be a short name"),
    config_case("db-empty", "db = \"\"\n", "'db' must be a name"),
    config_case("schedule-key-number", "schedule = 3\n", "'schedule' must be a table"),
]


def step_case(id: str, step: str, says: str, *, flags: tuple[str, ...] = (),
              head: str = "") -> Case:
    return Case(f"step-{id}", ("run", "--lock", "redis-setnx", "--config", "steps.toml",
                               *flags), says,
                (("steps.toml", toml(f"{head}[[step]]\n{step}\n")),))


STEP_CASES = [
    step_case("at-1e12", "at = 1e12\nfault = \"pause\"", "at must be 0 to 86400 seconds"),
    step_case("at-negative", "at = -1\nfault = \"pause\"", "at must be 0 to 86400"),
    step_case("at-nan", "at = nan\nfault = \"pause\"", "at must be a finite number"),
    step_case("at-inf", "at = inf\nfault = \"pause\"", "at must be a finite number"),
    step_case("at-string", "at = \"1\"\nfault = \"pause\"", "at must be a finite number"),
    step_case("at-missing", "fault = \"pause\"", "at must be a finite number"),
    step_case("at-at-time-limit", "at = 20\nfault = \"pause\"",
              "at = 20 s is not inside the run's time limit (20 s)"),
    step_case("at-past-time-limit", "at = 9\nfault = \"pause\"", "not inside the run's time",
              flags=("--time-limit", "5")),
    step_case("duration-1e12", "at = 1\nfault = \"pause\"\nduration = 1e12",
              "duration must be 0 to 86400"),
    step_case("duration-hours", "at = 1\nfault = \"pause\"\nduration = 7200",
              "duration must be at most 3600 seconds"),
    step_case("duration-negative", "at = 1\nfault = \"pause\"\nduration = -2",
              "duration must be 0 to 86400"),
    step_case("duration-bool", "at = 1\nfault = \"pause\"\nduration = true",
              "duration must be a finite number"),
    step_case("fault-missing", "at = 1", "fault must be a nemesis name"),
    step_case("fault-number", "at = 1\nfault = 3", "fault must be a nemesis name"),
    step_case("fault-unknown", "at = 1\nfault = \"meteor\"", "unknown nemesis 'meteor'"),
    step_case("fault-with-target", "at = 1\nfault = \"pause:holder\"",
              "fault names a target: write fault = 'pause' and target = 'holder'"),
    step_case("fault-with-bad-role", "at = 1\nfault = \"pause:nobody\"",
              "unknown target 'nobody'"),
    step_case("target-nobody", "at = 1\nfault = \"pause\"\ntarget = \"nobody\"",
              "cannot target 'nobody'"),
    step_case("target-client-99", "at = 1\nfault = \"pause\"\ntarget = \"client:99\"",
              "no client '99' in this run"),
    step_case("target-node-n9", "at = 1\nfault = \"kill\"\ntarget = \"node:n9\"",
              "no DB node 'n9' in this run (nodes: n1)"),
    step_case("target-number", "at = 1\nfault = \"pause\"\ntarget = 3",
              "target must be a word such as holder"),
    step_case("target-wrong-kind", "at = 1\nfault = \"kill\"\ntarget = \"holder\"",
              "cannot target 'holder'"),
    step_case("params-unknown", "at = 1\nfault = \"pause\"\nparams = { x = 1 }",
              "not an option of nemesis pause"),
    step_case("params-bad-value", "at = 1\nfault = \"clock\"\nparams = { clock-offset = \"x\" }",
              "clock-offset="),
    step_case("params-nested", "at = 1\nfault = \"pause\"\nparams = { x = { y = 1 } }",
              "params must be a table of names to plain values"),
    step_case("unknown-key", "at = 1\nfault = \"pause\"\nwhen = 3", "unknown key 'when'"),
    step_case("background-string", "at = 1\nfault = \"pause\"\nbackground = \"yes\"",
              "background must be true or false"),
    Case("step-not-a-table", ("run", "--config", "steps.toml"), "a step must be a table",
         (("steps.toml", b"step = [1, 2]\n"),)),
    Case("steps-too-many", ("run", "--config", "steps.toml"), "10001 steps; at most 10000",
         (("steps.toml", b"".join(b"[[step]]\nat = 1\nfault = \"pause\"\n"
                                  for _ in range(10_001))),)),
]


def replay_case(id: str, data: bytes, says: str) -> Case:
    return Case(f"replay-{id}", ("run", "--lock", "redis-setnx", "--replay", "plan.toml"),
                says, (("plan.toml", data),))


def replay_dir_case(id: str, test: bytes, says: str) -> Case:
    return Case(f"replay-dir-{id}", ("run", "--replay", "old"), says, (("old/test.json", test),))


REPLAY_CASES = [
    *(replay_case(id, data, says) for id, data, says in READ_ERRORS),
    replay_case("no-steps", b"time-limit = 5\n", "no [[step]] tables in it"),
    replay_case("at-1e12", b"[[step]]\nat = 1e12\nfault = \"pause\"\n", "at must be 0 to 86400"),
    replay_case("client-99", b"[[step]]\nat = 1\nfault = \"pause\"\ntarget = \"client:99\"\n",
                "no client '99'"),
    replay_dir_case("not-json", b"{", "not valid JSON"),
    replay_dir_case("no-schedule", json.dumps({"spec": {"lock": "redis-setnx"}}).encode(),
                    "records no fault schedule"),
    replay_dir_case("at-1e12", json.dumps({
        "spec": {"lock": "redis-setnx", "nemesis": ["pause"], "time_limit": 5.0},
        "schedule": {"steps": [{"at": 1e12, "fault": "pause"}]}}).encode(),
        "at must be 0 to 86400"),
    replay_dir_case("time-limit-1e308", json.dumps({
        "spec": {"lock": "redis-setnx", "nemesis": ["pause"], "time_limit": 1e308},
        "schedule": {"steps": []}}).encode(), "--time-limit must be at most 86400"),
]


def hosts_case(id: str, data: bytes, says: str) -> Case:
    return Case(f"hosts-{id}", ("run", "--backend", "ssh", "--hosts", "hosts.toml"), says,
                (("hosts.toml", data),))


HOSTS_CASES = [
    *(hosts_case(id, data, says) for id, data, says in READ_ERRORS),
    hosts_case("no-hosts", b"[defaults]\nuser = \"root\"\n", "no [[hosts]]"),
    hosts_case("port-huge", b"[[hosts]]\naddress = \"127.0.0.1\"\nport = 99999999999\n",
               "port 99999999999: give a TCP port number"),
    hosts_case("port-1e308", b"[[hosts]]\naddress = \"127.0.0.1\"\nport = 1e308\n",
               "give a TCP port number"),
    hosts_case("address-list", b"[[hosts]]\naddress = [\"a\"]\n", "is not an IPv4 address"),
    hosts_case("unknown-key", b"color = 1\n[[hosts]]\naddress = \"10.0.0.1\"\n",
               "unknown key 'color'"),
    Case("hosts-missing", ("run", "--backend", "ssh", "--hosts", "nowhere.toml"),
         "no such file"),
    *(Case(f"clean-hosts-{id}", ("clean", "--hosts", "hosts.toml"), says,
           (("hosts.toml", data),)) for id, data, says in READ_ERRORS[:5]),
]


def suite_case(id: str, data: bytes, says: str) -> Case:
    return Case(f"suite-{id}", ("suite", "suite.toml", "--dry-run"), says,
                (("suite.toml", data),))


SUITE_CASES = [
    *(suite_case(id, data, says) for id, data, says in READ_ERRORS),
    suite_case("no-runs", b"name = \"x\"\n", "has no [[run]] tables"),
    suite_case("unknown-key", b"colour = 1\n[[run]]\nlock = \"redis-setnx\"\n",
               "unknown key 'colour'"),
    suite_case("defaults-not-a-table", b"defaults = 3\n[[run]]\nlock = \"redis-setnx\"\n",
               "[defaults] must be a table"),
    Case("suite-missing", ("suite", "nowhere.toml", "--dry-run"), "no such file"),
    suite_case("matrix-3000", toml("[[run]]\nexpect = \"valid\"\nnemesis = [\"pause\", "
                                   "\"kill\", \"none\"]\nseeds = [" + ", ".join(
                                       map(str, range(1, 1001))) + "]\n"),
               "its matrix is 3,000 runs; a suite holds at most 2,000"),
    suite_case("time-limit-1e308", b"[[run]]\nexpect = \"valid\"\ntime-limit = 1e308\n",
               "--time-limit must be at most 86400"),
    suite_case("role-nobody", b"[[run]]\nexpect = \"valid\"\nnemesis = \"pause:nobody\"\n",
               "unknown target 'nobody'"),
    suite_case("client-99", b"[[run]]\nexpect = \"valid\"\nnemesis = "
               b"\"crash-client:client=99\"\n", "no client '99' in this run"),
]

PLUGIN_CASES = [
    *(Case(f"run-lock-{cls}", ("run", "--lock", f"{PLUGIN_MODULE}:{cls}"), says)
      for cls, says in BAD_LOCKS.items()),
    *(Case(f"list-lock-{cls}", ("list", "--lock", f"{PLUGIN_MODULE}:{cls}"), says)
      for cls, says in BAD_LOCKS.items()),
    Case("run-nemesis-none-option", run_argv("--nemesis", f"{PLUGIN_MODULE}:BadNemesis"),
         "options: 'x' must be an Option"),
    Case("list-nemesis-none-option", ("list", "--nemesis", f"{PLUGIN_MODULE}:BadNemesis"),
         "options: 'x' must be an Option"),
    Case("run-lock-old-import", ("run", "--lock", "bad_input_old:OldLock"),
         "workloads.locks.base was removed: import Grant, LockConfig, Indeterminate and "
         "LockRole from harness.core.locks"),
    Case("list-lock-old-import", ("list", "--lock", "bad_input_old:OldLock"),
         "workloads.locks.base was removed"),
    Case("run-lock-not-a-class", ("run", "--lock", f"{PLUGIN_MODULE}:broken"), "is not a class"),
    Case("run-lock-missing-class", ("run", "--lock", f"{PLUGIN_MODULE}:Nothing"),
         "has no 'Nothing'"),
]

CASES = [*FLAG_CASES, *CONFIG_CASES, *STEP_CASES, *REPLAY_CASES, *HOSTS_CASES, *SUITE_CASES,
         *PLUGIN_CASES]


def test_the_table_is_large_and_its_names_unique() -> None:
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plugins")
    (path / f"{PLUGIN_MODULE}.py").write_text(PLUGINS)
    (path / "bad_input_old.py").write_text(OLD_IMPORT)
    return path


@pytest.fixture
def where(tmp_path: Path, plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory, the plugins importable, no server binary on PATH."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("PATH", "/nonexistent")
    return tmp_path


def write_files(root: Path, files: tuple[tuple[str, bytes], ...]) -> None:
    for name, data in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def call(argv: tuple[str, ...]) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:  # argparse's own errors: exit 64 with its usage lines
        return int(e.code or 0)


def one_line(err: str) -> str:
    """The one line of a refusal (argparse adds its usage lines before its own)."""
    lines = err.splitlines()
    return lines[-1] if lines else ""


def assert_refused(code: int, out: str, err: str, case: Case, root: Path) -> None:
    assert code == EXIT_USAGE, (case.id, code, out, err)
    assert "Traceback" not in out + err and "internal error" not in out + err, (case.id, err)
    lines = err.splitlines()
    usage = bool(lines) and lines[0].startswith("usage:")  # argparse: its usage, then one line
    assert len(lines) == 1 or usage, (case.id, err)
    assert one_line(err).startswith("harness: "), (case.id, err)
    assert case.says in one_line(err), (case.id, case.says, err)
    store = root / "results"
    assert not store.exists() or not any(store.iterdir()), (case.id, list(store.iterdir()))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_exit_64_before_a_server_starts(
        case: Case, where: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(where, case.files)
    code = call(case.argv)
    captured = capsys.readouterr()
    assert_refused(code, captured.out, captured.err, case, where)


SUBPROCESS = ("time-limit-1e308", "nemesis-role-nobody", "config-deep-array",
              "step-at-1e12", "hosts-not-utf8", "suite-5000-digits", "run-lock-NoneOption",
              "list-lock-TypoDefault", "run-lock-old-import")


@pytest.mark.parametrize("case", [c for c in CASES if c.id in SUBPROCESS],
                         ids=lambda c: c.id)
def test_the_real_command_refuses_them_the_same(case: Case, tmp_path: Path,
                                                 plugin_dir: Path) -> None:
    write_files(tmp_path, case.files)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PATH": "/nonexistent",
           "PYTHONPATH": os.pathsep.join([str(plugin_dir), str(repo)])}
    proc = harness_in(tmp_path, case.argv, env)
    assert_refused(proc.returncode, proc.stdout, proc.stderr, case, tmp_path)


def harness_in(cwd: Path, argv: tuple[str, ...], env: dict[str, str]
               ) -> subprocess.CompletedProcess[str]:
    return bounded([sys.executable, "-m", "harness.cli", *argv], cwd=cwd, env=env,
                   timeout=60)


def test_a_history_of_nemesis_ops_only_is_unknown_with_or_without_a_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing a model checks: the same UNKNOWN (exit 2) either way, so a many-file check
    that holds such a file is not "bad usage"."""
    ops = [{"index": i, "type": t, "process": "nemesis", "f": "pause", "value": v,
            "time": i * 1000} for i, (t, v) in enumerate([("invoke", "start"), ("info", "start"),
                                                           ("invoke", "stop"), ("info", "stop")])]
    path = tmp_path / "nemesis.jsonl"
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    assert main(["check", str(path)]) == EXIT_UNKNOWN
    plain = capsys.readouterr().out
    assert main(["check", str(path), "--model", "mutex"]) == EXIT_UNKNOWN
    assert capsys.readouterr().out == plain
    assert plain.startswith("UNKNOWN ")
    assert main(["check", str(path), str(path), "--model", "mutex"]) == EXIT_UNKNOWN


TOML_WORDS = ("a", "=", "[", "]", "{", "}", ",", "\n", "1", "1e308", "nan", "\"x\"", "[[step]]",
              "99999999999999999999", "true", ".", "\xff", "\x00", "'''", "#")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200),
                 st.lists(st.sampled_from(TOML_WORDS), max_size=60).map(
                     lambda ws: " ".join(ws).encode("utf-8", "surrogateescape"))))
def test_any_bytes_read_as_toml_are_a_table_or_one_usage_line(data: bytes) -> None:
    import tempfile

    from harness.core.tomlfile import read_toml

    with tempfile.NamedTemporaryFile(suffix=".toml") as f:
        f.write(data)
        f.flush()
        try:
            table = read_toml(f.name, "spec")
        except UsageError as e:
            assert "\n" not in str(e) and str(e).startswith(f"spec {f.name}")
        else:
            assert isinstance(table, dict)
