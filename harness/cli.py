"""``harness``: run, check, report, list, clean, serve, suite. Exit codes: 0 valid, 1 invalid,
2 unknown, 3 the harness could not run the test, 64 bad usage. Errors are one line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import nemesis
from harness import dbs, netfilter, procs
from harness.errors import EXIT_SETUP, EXIT_USAGE, HarnessError, UsageError, exit_code_for
from harness.history import HistoryError, read_history
from harness.progress import Progress
from harness.report import verdict_word, write_report
from harness.spec import WORKLOADS, TestSpec
from harness.store import active_runs
from workloads.locks import LOCKS


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"harness: {message} (see `harness {self.prog.split()[-1]} --help`)"
              if " " in self.prog else f"harness: {message} (see `harness --help`)",
              file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> Parser:
    p = Parser(prog="harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    r = sub.add_parser("run", help="run a test against real servers")
    r.add_argument("--config", type=Path, help="a TOML test spec; flags override its keys")
    r.add_argument("--db", help="redis (default)")
    r.add_argument("--lock", help="a lock name (harness list) or package.module:Class")
    r.add_argument("--workload", help="mutex (default) or fenced")
    r.add_argument("--nemesis", help="comma-separated faults, or none (default: pause)")
    r.add_argument("--backend", help="local (default) or docker")
    r.add_argument("--nodes", type=int, help="DB nodes (default: the db's own)")
    r.add_argument("--clients", type=int, help="client processes (default 5)")
    r.add_argument("--time-limit", type=float, help="seconds of workload (default 20)")
    r.add_argument("--seed", type=int, help="random seed (default: a random one, recorded)")
    r.add_argument("--store", help="results directory (default ./results)")
    r.add_argument("--ttl", type=float, help="lock TTL / lease in seconds (default 2)")
    r.add_argument("--persistence", help="DB nodes' persistence: none (default) or appendonly "
                   "(redis: appendfsync always)")
    r.add_argument("--nemesis-opt", action="append", metavar="KEY=VALUE",
                   help="a nemesis option, e.g. clock-nodes=all, crash-step=holding, "
                   "kill-delay=3 (repeatable)")
    r.add_argument("--quiet", action="store_true", help="no progress output")

    c = sub.add_parser("check", help="re-check a stored run, or check a history file")
    c.add_argument("run_dir", type=Path, metavar="RUN_DIR|FILE",
                   help="a run directory, or a history file (.jsonl, Jepsen .edn or text log)")
    c.add_argument("--model", help="for a history file: mutex (default), fenced-mutex, "
                   "register or cas-register")
    c.add_argument("--time-limit", type=float, default=60.0,
                   help="linearizability budget in seconds; past it the verdict is unknown")

    ex = sub.add_parser("export", help="write a run's history as Jepsen EDN (history.edn)")
    ex.add_argument("run_dir", type=Path)

    rep = sub.add_parser("report", help="rebuild report.html of a stored run")
    rep.add_argument("run_dir", type=Path)

    sub.add_parser("list", help="dbs, locks, workloads and nemeses")

    cl = sub.add_parser("clean", help="remove anything runs left behind")
    cl.add_argument("--force", action="store_true", help="also stop runs still in progress")

    sv = sub.add_parser("serve", help="browse the results store in a web browser")
    sv.add_argument("--store", type=Path, default=Path("results"),
                    help="results directory (default ./results)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    sv.add_argument("--quiet", action="store_true", help="no line per request")

    su = sub.add_parser("suite", help="run a TOML matrix of tests with expected verdicts (CI)")
    su.add_argument("file", type=Path, help="suite file: [[run]] tables (see docs/ci.md)")
    su.add_argument("--junit", type=Path, help="JUnit XML path (default: in the suite's "
                    "directory under the store)")
    su.add_argument("--store", type=Path, default=Path("results"),
                    help="results directory (default ./results)")
    su.add_argument("--dry-run", action="store_true", help="validate and list the runs only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HarnessError as e:
        print(f"harness: {e}", file=sys.stderr)
        return e.exit_code
    except HistoryError as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_SETUP


# run ----------------------------------------------------------------------------------------------
def spec_from_args(args: argparse.Namespace) -> TestSpec:
    data: dict[str, Any] = {}
    if args.config is not None:
        data = load_toml(args.config)
    for key in ("db", "lock", "workload", "backend", "nodes", "clients", "time_limit", "seed",
                "store", "ttl"):
        value = getattr(args, key)
        if value is not None:
            data[key] = value
    if args.nemesis is not None:
        data["nemesis"] = nemesis.parse(args.nemesis)
    if args.persistence is not None:
        data["persistence"] = args.persistence
    if args.nemesis_opt:
        data["nemesis_options"] = {**data.get("nemesis_options", {}),
                                   **parse_options(args.nemesis_opt)}
    return TestSpec.from_dict(data).validate()


def parse_options(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--nemesis-opt {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def load_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return {k.replace("-", "_"): v for k, v in tomllib.loads(path.read_text()).items()}
    except OSError as e:
        raise UsageError(f"cannot read spec {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"spec {path} is not valid TOML: {e}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from harness.run import Run

    spec = spec_from_args(args)
    progress = Progress(quiet=args.quiet)
    progress.line(f"harness run: db {spec.db} x{spec.nodes}, lock {spec.lock}, workload "
                  f"{spec.workload}, nemesis {'+'.join(spec.nemesis) or 'none'}, "
                  f"{spec.clients} clients, {spec.time_limit:g} s, seed {spec.seed}")
    outcome = Run(spec, progress).execute()
    print_summary(outcome.results, outcome.run_dir)
    if outcome.interrupted:
        print("run interrupted: the verdict covers only what was recorded", file=sys.stderr)
        return EXIT_SETUP
    return exit_code_for(outcome.results.get("valid"))


# check / report -----------------------------------------------------------------------------------
def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from harness.run import collect_history, journals_dir

    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a run directory (expected results/<test>/<time>)")
    try:
        spec = json.loads((run_dir / "test.json").read_text())["spec"]
    except (OSError, ValueError, KeyError):
        raise HarnessError(f"{run_dir}/test.json is missing or unreadable: not a run "
                           "directory?") from None
    if (run_dir / "history.jsonl").exists():
        history = read_history(run_dir / "history.jsonl")
    elif journals_dir(run_dir).is_dir():
        history = collect_history(run_dir)  # a run that died before merging
    else:
        raise HarnessError(f"{run_dir} has no history.jsonl and no journals")
    return spec, history


def cmd_check(args: argparse.Namespace) -> int:
    from harness.run import check_run

    if args.run_dir.is_file():
        return check_file(args.run_dir, args.model or "mutex", args.time_limit)
    if args.model is not None:
        raise UsageError("--model is for a history file; a run directory is checked with the "
                         "checkers of its workload")
    run_dir = args.run_dir.resolve()
    spec, history = load_run(run_dir)
    results = check_run(run_dir, spec, history)
    print_summary(results, run_dir)
    return exit_code_for(results.get("valid"))


def check_file(path: Path, model: str, time_limit: float) -> int:
    """A foreign (or our own) history file, checked for linearizability against ``model``."""
    from checker.linearizable import check
    from checker.models import MODELS
    from harness.interop import load_any

    if model not in MODELS:
        raise UsageError(f"unknown model {model!r}: use one of {', '.join(sorted(MODELS))}")
    if time_limit <= 0:
        raise UsageError(f"--time-limit must be a positive number of seconds, got {time_limit}")
    result = check(load_any(path), model, time_limit=time_limit)
    print(f"{verdict_word(result['valid'])}  {path} as {model}: {result['ops']} ops in "
          f"{result['parts']} part(s)")
    witness = result.get("witness")
    if witness:
        print(f"  {witness['explanation']}")
    if result.get("reason"):
        print(f"  {result['reason']}")
    return exit_code_for(result["valid"])


def cmd_export(args: argparse.Namespace) -> int:
    from harness.interop import write_edn_history

    run_dir = args.run_dir.resolve()
    _spec, history = load_run(run_dir)
    out = run_dir / "history.edn"
    write_edn_history(out, history)
    print(out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = args.run_dir.resolve()
    spec, history = load_run(run_dir)
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        raise HarnessError(f"{run_dir}/results.json is missing: run `harness check "
                           f"{args.run_dir}` first") from None
    print(write_report(run_dir, spec, history, results))
    return 0


def print_summary(results: dict[str, Any], run_dir: Path) -> None:
    print(f"{verdict_word(results.get('valid'))}")
    for name, check in results.get("checks", {}).items():
        line = f"  {name:<13} {verdict_word(check.get('valid')):<8}"
        facts = [f"{k} {v}" for k, v in check.items()
                 if k.endswith(("-count", "-rejected", "-accepted")) and not isinstance(v, list)]
        print(line + ", ".join(facts))
        for key in ("lock-overlaps", "resource-interleavings", "stale-accepted",
                    "token-order-violations", "stuck-locks", "lost-updates"):
            items = check.get(key) or []
            if items:
                note = (" (informational: the resource checks tokens)"
                        if key == "lock-overlaps" and check.get("lock-overlaps-informational")
                        else "")
                print(f"                first of {key}{note}: {items[0]['explanation']}")
        witness = check.get("witness")
        if isinstance(witness, dict) and witness.get("explanation"):
            print(f"                witness: {witness['explanation']}")
    print(f"report: {run_dir / 'report.html'}")


# list / clean -------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    print("dbs:")
    for name, cls in dbs.DBS.items():
        print(f"  {name:<20} {cls.summary}")
    print("locks:")
    for info in LOCKS.values():
        tokens = " [tokens]" if info.tokens else ""
        print(f"  {info.name:<20} {info.summary}{tokens}")
    print("  package.module:Class  your own lock (see README)")
    print("workloads:")
    for name, summary in WORKLOADS.items():
        print(f"  {name:<20} {summary}")
    print("nemeses:")
    for name, summary in nemesis.summaries().items():
        print(f"  {name:<20} {summary}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    live_runs: set[str] = set()
    cleaned = 0
    for marker, data in active_runs():
        run_id = str(data.get("run_id", marker.stem))
        controller = int(data.get("controller", 0) or 0)
        started = data.get("controller_started")
        if (controller and controller != os.getpid() and started is not None
                and procs.owned(controller, int(started))):
            if not args.force:
                print(f"run {run_id} is still in progress (controller pid {controller}); "
                      "use --force to stop it")
                live_runs.add(run_id.replace("/", ":"))
                continue
            os.kill(controller, signal.SIGKILL)
        run_dir = Path(str(data.get("run_dir", "")))
        killed = procs.kill_recorded(run_dir) if run_dir.is_dir() else []
        for k in killed:
            print(f"killed {k} of {run_id}")
        marker.unlink(missing_ok=True)
        cleaned += 1
    containers = networks = 0
    if shutil.which("dockerd") or os.path.exists("/var/run/docker.sock"):
        try:
            from harness.backends import docker as docker_backend

            containers, networks = docker_backend.leftovers(
                docker_backend.client(), {r.replace(":", "/", 1) for r in live_runs})
        except HarnessError:
            pass
    removed = 0
    if os.geteuid() == 0 and netfilter.rules() is not None:
        try:
            removed = netfilter.remove_rules(lambda owner: owner not in live_runs)
            netfilter.remove_chain_if_empty()
        except HarnessError as e:
            print(f"harness: {e}", file=sys.stderr)
    print(f"clean: {cleaned} run(s) cleaned, {removed} iptables rule(s), {containers} "
          f"container(s), {networks} network(s) removed")
    return 0


# serve / suite ------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from harness.serve import serve

    return serve(args.store, args.host, args.port, args.quiet)


def cmd_suite(args: argparse.Namespace) -> int:
    from harness.suite import command

    return command(args.file, args.store, args.junit, args.dry_run)


COMMANDS = {"run": cmd_run, "check": cmd_check, "export": cmd_export, "report": cmd_report,
            "list": cmd_list,
            "clean": cmd_clean, "serve": cmd_serve, "suite": cmd_suite}


def run_main() -> None:  # pragma: no cover
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
