"""The command line's grammar: every command's options, with argparse.

`harness check FILE...` in its common form does not come here (:mod:`harness.check_argv`
reads it without argparse); anything else does, and argparse's answer, its help and its
errors (one line, exit 64) are the command line's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from harness.check_argv import DEFAULTS as CHECK_DEFAULTS
from harness.core.errors import EXIT_USAGE

DESCRIPTION = ("Run, explore and check distributed-lock tests on real servers. Exit codes: 0 "
               "valid, 1 invalid, 2 unknown, 3 the harness could not run (or check) the test, "
               "64 bad usage. Errors are one line.")


ROLE_KINDS = ("dbs", "locks", "workloads", "nemeses", "resources", "checkers")


class Formatter(argparse.HelpFormatter):
    """argparse's help formatter, told the terminal's width up front: argparse makes one for
    every argument it adds, and finding the width itself imports shutil (and its compression
    modules) into every `harness` process, `harness check` included."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            width = terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _get_help_string(self, action: argparse.Action) -> str:
        """The help, its ``{dbs}``, ``{locks}``, ... the registry's names of that kind (its
        builtins and every installed plugin's): read when the help is shown, never typed."""
        text = action.help or ""
        if "{" in text:
            from harness.controller.registry import default_registry

            reg = default_registry()
            for kind in ROLE_KINDS:
                text = text.replace(f"{{{kind}}}", ", ".join(reg.names(kind)))
        return text


def terminal_columns() -> int:
    """As shutil.get_terminal_size: $COLUMNS, else the terminal's, else 80."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        print(f"harness: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def add_run_options(r: argparse.ArgumentParser, time_limit_default: str = "20") -> None:
    """The options of a test spec (harness run and harness explore share them)."""
    r.add_argument("--config", type=Path, help="a TOML test spec; flags override its keys")
    r.add_argument("--db", help="{dbs} (default redis)")
    r.add_argument("--lock", help="{locks} (default: the db's own); or package.module:Class, "
                   "or exec:PATH (a program speaking docs/clients.md's protocol)")
    r.add_argument("--workload", help="{workloads} (default mutex); each checks its history "
                   "with its own of the checkers {checkers} (harness list)")
    r.add_argument("--resource", help="the protected resource: {resources} (default redis; "
                   "postgres for pg-row / pg-advisory-xact, in their own database, and for "
                   "--workload idempotent)")
    r.add_argument("--resource-mode", help="how the resource guards itself: plain, fenced "
                   "(token), version (WHERE version = read), cas (antirez's check-and-set); "
                   "default: fenced for --workload fenced, else plain")
    r.add_argument("--backend", help="local (default), docker or ssh")
    r.add_argument("--hosts", help="the ssh backend's hosts file (HOSTS.toml; see docs/ssh.md)")
    r.add_argument("--nodes", type=int, help="DB nodes (default: the db's own)")
    r.add_argument("--clients", type=int, help="client processes (default 5)")
    r.add_argument("--time-limit", type=float,
                   help=f"seconds of workload (default {time_limit_default})")
    r.add_argument("--seed", type=int, help="random seed (default: a random one, recorded)")
    r.add_argument("--store", help="results directory (default ./results)")
    r.add_argument("--ttl", type=float, help="lock TTL / lease in seconds (default 2)")
    r.add_argument("--persistence", help="DB nodes' persistence: none (default), appendonly "
                   "(redis: appendfsync always), everysec, nofsync (harness list --db NAME)")
    r.add_argument("--links", help="direct (default: unless a nemesis needs the link layer) "
                   "or proxy: every client link through the link layer's proxy")
    r.add_argument("--op-timeout", type=float, help="seconds a client waits for one reply "
                   "(default 1, or what the nemesis needs)")
    r.add_argument("--nemesis-opt", action="append", metavar="KEY=VALUE",
                   help="a nemesis option, e.g. clock-nodes=all, crash-step=holding, "
                   "kill-delay=3 (repeatable)")
    r.add_argument("--lock-opt", action="append", metavar="KEY=VALUE",
                   help="an option the lock declares (harness list --lock NAME shows them; "
                   "repeatable)")
    r.add_argument("--hold", metavar="S|MIN-MAX",
                   help="seconds a holder works under the lock (default: the lock's own)")
    r.add_argument("--think", metavar="S|MIN-MAX", help="seconds between sessions")
    r.add_argument("--acquire-timeout", type=float, metavar="S",
                   help="seconds an acquire may take before it counts as failed")
    r.add_argument("--keys", type=int, metavar="N",
                   help="independent locks (default 1): client p works on lock p mod N, each "
                   "lock with its own data and its own checks")


def build_parser(only: str | None = None) -> Parser:
    """The command line; ``only``: the one command it is for (else all of them): argparse
    makes every option of every command it is told of, and `harness check` on a small file is
    a few milliseconds of work."""

    def want(command: str) -> bool:
        return only is None or only == command

    p = Parser(prog="harness", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    if want("run"):
        r = sub.add_parser("run", help="run a test against real servers")
        add_run_options(r)
        r.add_argument("--nemesis", help="comma-separated faults of {nemeses}, or none "
                       "(default: pause); "
                       "FAULT:ROLE aims a fault at a role, e.g. partition:waiter, pause:any, "
                       "pause-node:leader, kill:node=n2")
        r.add_argument("--replay", type=Path, metavar="RUN_DIR|SCHEDULE.toml",
                       help="run a recorded fault schedule step for step: a run directory's (its "
                       "spec too, each step with the duration it ran with), or a TOML file's "
                       "[[step]] tables (and any spec keys in it); flags override")
        r.add_argument("--quiet", action="store_true", help="no progress output")
        r.add_argument("--print-config", action="store_true",
                       help="print the resolved spec as TOML (for --config; the keys: "
                       "docs/spec.md) and exit, nothing started")

    if want("explore"):
        xp = sub.add_parser(
            "explore", help="search fault schedules for a violation, shrink it, replay it",
            description="Search fault schedules drawn from --menu (hypothesis) for one that breaks "
            "the lock, each example a real run; a schedule fails only if it fails in K of K "
            "replays; the first failing one is shrunk to the smallest that still fails, written "
            "as minimal.toml (harness run --config minimal.toml), and replayed to measure how "
            "often it reproduces. Exit 1: a violation was found; 0: none in the budget.")
        add_run_options(xp, time_limit_default="8")
        xp.add_argument("--menu", required=True, metavar="FAULT[,FAULT...]",
                        help="the faults a schedule may use; FAULT:ROLE pins a step's target "
                        "(e.g. pause:holder); otherwise each step draws one of the roles the "
                        "fault takes")
        xp.add_argument("--budget", type=int, required=True, metavar="RUNS",
                        help="runs the search may take (replays included); a schedule under way "
                        "still finishes its replays")
        xp.add_argument("--replays", type=int, default=2, metavar="K",
                        help="a schedule counts as failing only if it fails in K of K runs "
                        "(default 2)")
        xp.add_argument("--reproduce", type=int, default=10, metavar="N",
                        help="replays of the final schedule that measure how often it fails "
                        "(default 10; 0: skip)")
        xp.add_argument("--max-steps", type=int, metavar="N",
                        help="steps a schedule may have (default: one per 2 s of --time-limit, "
                        "at most 8)")
        xp.add_argument("--jobs", type=int, metavar="N",
                        help="runs at once on the local backend (default: the cores); the "
                        "search and its shrinking are the same as with 1")
        xp.add_argument("--quiet", action="store_true", help="no progress output")

    if want("check"):
        c = sub.add_parser("check", help="re-check a stored run, or check history files")
        c.add_argument("run_dir", type=Path, metavar="RUN_DIR|FILE", nargs="+",
                       help="a run directory, or a history file (.jsonl, Jepsen .edn or text log); "
                       "several are checked one by one in this process, and the exit code is the "
                       "worst of their verdicts (invalid, then could not check, then unknown)")
        c.add_argument("--model", help="for a history file: mutex, fenced-mutex, register or "
                       "cas-register (default: inferred from the history's ops)")
        c.add_argument("--time-limit", type=float, default=CHECK_DEFAULTS["time_limit"],
                       help="linearizability budget in seconds; past it the verdict is unknown")
        c.add_argument("--max-memory", metavar="SIZE",
                       help="memory budget, e.g. 2G (default: a quarter of this machine's memory);"
                       " past it the verdict is unknown")
        c.add_argument("--write", action="store_true",
                       help="a run directory's results.json and report.html are written over "
                       "its own (default: in a new RUN/rechecks/<time>/, the run left as it was)")

    if want("export"):
        ex = sub.add_parser("export", help="write a run's history as Jepsen EDN (history.edn)")
        ex.add_argument("run_dir", type=Path)

    if want("report"):
        rep = sub.add_parser("report", help="rebuild report.html of a stored run")
        rep.add_argument("run_dir", type=Path)
        rep.add_argument("--png", type=Path, metavar="FILE",
                         help="also write its timeline and charts as a PNG (about 1200 px "
                         "wide, to paste into an issue; needs chromium)")

    if want("list"):
        ls = sub.add_parser("list", help="dbs, locks, workloads, nemeses and checkers, with "
                            "their origin; --lock NAME, --nemesis NAME or --db NAME: one in "
                            "detail, with its options")
        ls.add_argument("--lock", metavar="NAME",
                        help="one lock in detail (a name or module:Class)")
        ls.add_argument("--nemesis", metavar="NAME", help="one nemesis in detail")
        ls.add_argument("--db", metavar="NAME", help="one db in detail (its persistence modes)")
        ls.add_argument("--spec", action="store_true",
                        help="every key of a test spec, suite and hosts file, in Markdown "
                        "(docs/spec.md)")

    if want("doctor"):
        dr = sub.add_parser("doctor", help="what this machine has and lacks for each db, backend, "
                            "fault and client, and the `harness setup` that installs it")
        for flag in ("--db", "--backend", "--lock", "--nemesis"):
            dr.add_argument(flag, help=f"exit 1 unless this {flag[2:]} can run here "
                            "(default: harness run's)")

    if want("setup"):
        se = sub.add_parser("setup", help="install what the chosen dbs, backends, faults and "
                            "clients need (Debian packages, the node image, the clients' builds)")
        for flag, what in (("--db", "dbs"), ("--backend", "backends"), ("--nemesis", "faults")):
            se.add_argument(flag, action="append", default=[], metavar="NAME,...|all",
                            help=f"{what} to set up" + (" (all: those from Debian's archive; "
                                 "another repository's, such as spanner's, by name)"
                                 if flag == "--db" else ""))
        se.add_argument("--clients", action="append", default=[], nargs="?", const="all",
                        metavar="NAME,...", help="build the external lock clients (default all)")
        se.add_argument("--zoo", nargs="?", const="", metavar="FILE",
                        help="what harness zoo needs: its stores, faults and clients, and the "
                        "[zoo] extra's libraries (default: the shipped suites/zoo.toml)")
        se.add_argument("--all", action="store_true", help="everything")
        se.add_argument("--dry-run", action="store_true", help="print the commands only")

    if want("clean"):
        cl = sub.add_parser("clean", help="remove anything runs left behind")
        cl.add_argument("--force", action="store_true", help="also stop runs still in progress")
        cl.add_argument("--store", type=Path, metavar="DIR",
                        help="only the runs of this store and what they left (default: every "
                             "run on this machine)")
        cl.add_argument("--hosts", type=Path, metavar="HOSTS.toml",
                        help="also clean the ssh backend's hosts in this file")

    if want("hosts"):
        ho = sub.add_parser("hosts", help="SSH hosts in containers, to try --backend ssh on")
        hsub = ho.add_subparsers(dest="hosts_command", required=True, parser_class=Parser)
        hu = hsub.add_parser("up", help="start N SSH hosts and write HOSTS.toml")
        hu.add_argument("count", type=int, metavar="N")
        hu.add_argument("--file", type=Path, default=Path("HOSTS.toml"),
                        help="the hosts file to write (default ./HOSTS.toml; keys in HOSTS.keys/)")
        hd = hsub.add_parser("down", help="remove the hosts of HOSTS.toml, and the file")
        hd.add_argument("--file", type=Path, default=Path("HOSTS.toml"),
                        help="the hosts file (default ./HOSTS.toml)")
        hd.add_argument("--all", action="store_true", help="every set of hosts on this engine")

    if want("serve"):
        sv = sub.add_parser("serve", help="browse the results store in a web browser")
        sv.add_argument("--store", type=Path, default=Path("results"),
                        help="results directory (default ./results)")
        sv.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
        sv.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
        sv.add_argument("--quiet", action="store_true", help="no line per request")

    if want("suite"):
        su = sub.add_parser("suite", help="run a TOML matrix of tests with expected verdicts (CI)",
                            usage="harness suite [options] FILE\n       harness suite merge "
                            "[--store DIR] [--junit PATH] DIR...",
                            description="Run a suite file (or one shard of it), or merge the "
                            "shards' results into one (see docs/ci.md).")
        su.add_argument("paths", nargs="+", metavar="FILE | merge DIR...",
                        help="a suite file: [[run]] tables; or `merge` and the directories the "
                        "shards wrote (or directories holding them, e.g. downloaded artifacts)")
        su.add_argument("--shard", metavar="I/N", help="run only the I-th of N parts of the suite "
                        "(deterministic, balanced by estimated time; for CI machines in parallel)")
        su.add_argument("--seeds", metavar="LIST", help="run every row (an entry but its "
                        "seed) under each of these seeds instead of the file's: 1-20, 3, "
                        "1,4,7-9; the summary says how often each row was right")
        su.add_argument("--junit", type=Path, help="JUnit XML path (default: in the suite's "
                        "directory under the store)")
        su.add_argument("--store", type=Path, default=Path("results"),
                        help="results directory (default ./results)")
        su.add_argument("--jobs", type=int, metavar="N",
                        help="local runs at once (default: the cores); docker and ssh runs go "
                        "one at a time")
        su.add_argument("--dry-run", action="store_true", help="validate and list the runs only")

    if want("zoo"):
        zo = sub.add_parser("zoo", help="lock libraries under their store's faults: a safety "
                            "matrix page (resumable)",
                            description="Run every library of the zoo file under every fault "
                            "of its store's menu, N seeds a cell; runs already made with the "
                            "same settings and versions are reused; writes STORE/zoo/index.html "
                            "and README.md.")
        zo.add_argument("file", nargs="?", type=Path, help="the zoo file (default: the "
                        "checkout's suites/zoo.toml)")
        zo.add_argument("--seeds", default="1", metavar="N|LIST",
                        help="N seeds a cell (1 to N), or these seeds: 1-3, 4,7 (default 1)")
        zo.add_argument("--libraries", metavar="A,B", help="only these libraries (rows)")
        zo.add_argument("--faults", metavar="A,B", help="only these faults (columns)")
        zo.add_argument("--time-limit", type=float, help="seconds a run (default: the file's)")
        zo.add_argument("--store", type=Path, default=Path("results"),
                        help="results directory (default ./results)")
        zo.add_argument("--jobs", type=int, metavar="N", help="local runs at once (default: "
                        "the cores)")
        zo.add_argument("--plan", "--dry-run", action="store_true", help="run nothing: say "
                        "a row at a time how many runs are due and how many are reused")
        zo.add_argument("--markdown", type=Path, metavar="PATH", help="also write the Markdown "
                        "page there, with this command and the date (e.g. docs/zoo.md)")
    return p
