"""The top of the layers: reads the command line (:mod:`harness.check_argv` for a plain
`harness check FILE...`, else argparse in :mod:`harness.cli_parser`), runs the command, and turns
what goes wrong into one line and an exit code: 0 valid, 1 invalid, 2 unknown, 3 the harness
could not run (or check) the test, 64 bad usage.

Its imports are few on purpose: a `harness check` of a small file takes milliseconds, and
scripts call it once per file, so what every call imports is most of what it costs."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time

from harness.check_argv import quick_check_args
from harness.core.errors import (
    EXIT_SETUP,
    EXIT_VALID,
    HarnessError,
    UsageError,
)
from harness.core.history import HistoryError

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any

    from harness.controller.store import RunDir
    from harness.presentation.suite import Outcome, Suite


def parse_args(argv: list[str] | None) -> Any:
    """The arguments, as argparse would give them: a plain `harness check FILE...` read
    directly, anything else (help and bad usage included) by argparse."""
    words = sys.argv[1:] if argv is None else argv
    quick = quick_check_args(words)
    if quick is not None:
        return quick
    from harness.cli_parser import build_parser

    command = words[0] if words and words[0] in COMMANDS else None
    return build_parser(command).parse_args(words)


def main(argv: list[str] | None = None) -> int:
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ReaderMayLeave(sys.stdout), ReaderMayLeave(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()  # (what is still buffered: a reader gone by now is silenced too)
        sys.stdout, sys.stderr = streams


class ReaderMayLeave:
    """A command's stdout (or stderr) whose reader may leave before the end (`harness check
    FILE | head -1`): the first write or flush that meets the closed pipe (BrokenPipeError)
    sends what is left to /dev/null, and the command carries on to its own exit code. A
    closed pipe ends the printing, never the verdict."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)  # (what the pipe refused, still buffered, goes there next flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _main(argv: list[str] | None) -> int:
    args = parse_args(argv)
    # SIGTERM as SIGINT, whatever the parent left them as (a background job ignores SIGINT):
    # either one, before a run has set its own handlers, ends the command in one line, exit 3.
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (main() called from a test's thread): leave them
        pass
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return EXIT_SETUP
    except HarnessError as e:
        for line in str(e).splitlines() or [""]:
            print(f"harness: {line}", file=sys.stderr)
        return e.exit_code
    except HistoryError as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_SETUP
    except Exception as e:  # a bug of ours is never a verdict: one line, exit 3
        print(f"harness: internal error: {type(e).__name__}: {str(e)[:200]} "
              f"(traceback: {_save_traceback()})", file=sys.stderr)
        return EXIT_SETUP


def _save_traceback() -> str:
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="lock-harness-crash-", suffix=".txt",
                                     delete=False) as f:
        traceback.print_exc(file=f)
    return f.name


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# run ----------------------------------------------------------------------------------------------
def spec_data(args: argparse.Namespace) -> dict[str, Any]:
    """The spec's keys from --config, then --replay, then the flags (each overrides)."""
    from harness.controller.spec import parse_nemeses

    data: dict[str, Any] = {}
    if args.config is not None:
        data = load_toml(args.config)
    if getattr(args, "replay", None) is not None:
        data = {**data, **replay_data(args.replay)}
    for key in ("db", "lock", "workload", "backend", "nodes", "clients", "time_limit", "seed",
                "store", "ttl", "hosts", "resource", "resource_mode", "links", "op_timeout"):
        value = getattr(args, key)
        if value is not None:
            data[key] = value
    if getattr(args, "nemesis", None) is not None:
        data["nemesis"] = parse_nemeses(args.nemesis)
    if args.persistence is not None:
        data["persistence"] = args.persistence
    for key in ("hold", "think", "acquire_timeout", "keys"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    for flag, key, items in (("--nemesis-opt", "nemesis_options", args.nemesis_opt),
                             ("--lock-opt", "lock_options", args.lock_opt)):
        if items:
            data[key] = {**data.get(key, {}), **parse_options(flag, items)}
    return data


def replay_data(path: Path) -> dict[str, Any]:
    """What ``--replay`` gives: a run directory's spec and its schedule as it ran, or a TOML
    file's [[step]] tables (with any spec keys beside them)."""
    from harness.controller.faults import as_ran
    from harness.controller.store import open_run

    if path.is_dir():
        run = open_run(path)
        try:
            test = run.load_test()
        except HarnessError as e:
            raise UsageError(f"--replay {path}: {e}") from None
        data = dict(test["spec"])
        data["schedule"] = as_ran(test, str(run.test_json)).to_dict()
        return data
    if not path.exists():
        raise UsageError(f"--replay {path}: no such run directory or schedule file")
    data = load_toml(path)
    if "schedule" not in data:
        raise UsageError(f"--replay {path}: no [[step]] tables in it (a schedule is "
                         "[[step]] tables with at, fault, target, duration, params)")
    return data


def parse_options(flag: str, items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def load_toml(path: Path) -> dict[str, Any]:
    """A spec file: ``harness run``'s long options as keys, ``[nemesis-options]`` and a
    ``[lock]`` table (``name`` plus the lock's options) or ``lock`` + ``[lock-options]``, and
    ``[[step]]`` tables (a fault schedule, run as given)."""
    from harness.core.tomlfile import read_toml

    data = {k.replace("-", "_"): v for k, v in read_toml(path, "spec").items()}
    for key in ("nemesis_opt", "lock_opt"):
        if key in data:
            data[key.replace("opt", "options")] = data.pop(key)
    if "step" in data:  # [[step]] tables: a fault schedule to run instead of drawing one
        data["schedule"] = {"steps": data.pop("step")}
    lock = data.get("lock")
    if isinstance(lock, dict):
        options = dict(lock)
        name = options.pop("name", None)
        if not isinstance(name, str):
            raise UsageError(f"spec {path}: the [lock] table needs name = \"a lock\"")
        data["lock"] = name
        data["lock_options"] = {**data.get("lock_options", {}), **options}
    return data


def cmd_run(args: argparse.Namespace) -> int:
    from harness.controller.needs import unmet
    from harness.controller.progress import Progress
    from harness.controller.spec import TestSpec
    from harness.presentation.runs import run_and_report

    spec = TestSpec.from_dict(spec_data(args)).validate()  # resolved once, for the run
    if args.print_config:
        print(spec.to_toml(), end="")
        return 0
    if (missing := unmet(spec)) is not None:  # as `harness doctor` says it
        raise HarnessError(missing)
    return run_and_report(spec, Progress(quiet=args.quiet))


# explore ------------------------------------------------------------------------------------------
def cmd_explore(args: argparse.Namespace) -> int:
    from harness.controller.progress import Progress
    from harness.controller.spec import TestSpec, parse_nemeses
    from harness.presentation.explore import Explore

    menu = parse_nemeses(args.menu)
    if not menu:
        raise UsageError("--menu none: name the faults to search, e.g. --menu pause,kill")
    data = spec_data(args)
    if "schedule" in data:
        raise UsageError("explore draws its own schedules: leave the [[step]] tables out of "
                         "--config")
    data["nemesis"] = menu
    data.setdefault("time_limit", 8.0)
    spec = TestSpec.from_dict(data).validate()
    return Explore(spec, menu, budget=args.budget, replays=args.replays,
                   reproduce=args.reproduce, max_steps=args.max_steps,
                   progress=Progress(quiet=args.quiet), jobs=args.jobs).execute()


# check / report / export --------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    from harness.presentation.check_file import check_limits, check_paths

    return check_paths(args.run_dir, args.model, check_limits(args.time_limit, args.max_memory),
                       args.write)


def verified_run(path: Path) -> tuple[RunDir, dict[str, Any]]:
    """The run directory at ``path`` and its test.json, held to its manifest as `harness
    check` holds it (a damaged directory: HarnessError naming the file, exit 3; no manifest:
    said on stderr)."""
    from harness.controller.store import open_run

    run = open_run(path)
    test = run.load_test()
    note = run.verify(test)
    if note:
        print(f"harness: {path}: {note}", file=sys.stderr)
    return run, test


def cmd_export(args: argparse.Namespace) -> int:
    from harness.presentation.interop import write_edn_history

    run, _ = verified_run(args.run_dir)
    out = run.path / "history.edn"
    write_edn_history(out, run.load_history())
    print(out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.presentation.report import write_report

    run, test = verified_run(args.run_dir)
    spec = test["spec"]
    history = run.load_history()
    try:
        results = run.load_results()
    except HarnessError:
        raise HarnessError(f"{run.results} is missing: run `harness check "
                           f"{args.run_dir}` first") from None
    page = write_report(run, spec, history, results)
    print(page)
    if args.png:
        from harness.presentation.report.png import write_png

        width, height = write_png(page, args.png)
        print(f"{args.png} ({width}x{height} px: the timeline and its charts)")
    return 0


# list / clean -------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from harness.presentation.list_roles import list_roles

    if args.spec:
        from harness.presentation.spec_doc import markdown

        print(markdown(), end="")
        return 0
    return list_roles(args.lock, args.nemesis, args.db)


def cmd_doctor(args: argparse.Namespace) -> int:
    from harness.controller.spec import parse_nemeses
    from harness.presentation.doctor import doctor

    asked = {k: getattr(args, k) for k in ("db", "backend", "lock") if getattr(args, k)}
    if args.nemesis is not None:
        asked["nemesis"] = parse_nemeses(args.nemesis)
    return doctor(asked)


def cmd_setup(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.controller.registry import default_registry
    from harness.controller.setup_cmd import choice, setup

    reg = default_registry()
    extra: dict[str, list[str]] = {}
    if args.zoo is not None:  # what the zoo file's libraries and faults need
        from harness.presentation import zoo

        extra = zoo.needs(zoo.load(Path(args.zoo) if args.zoo else zoo.ZOO_FILE, reg), reg)
    c = choice([*args.db, *extra.get("dbs", [])], args.backend,
               [*args.nemesis, *extra.get("faults", [])],
               [*args.clients, *extra.get("clients", [])], args.all, reg)
    c.python = extra.get("python", [])
    return setup(c, args.dry_run, reg)


def cmd_clean(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.controller.backends.ssh.hosts import load
    from harness.controller.cleanup import clean

    given = load(args.hosts) if args.hosts is not None else None  # a bad file: exit 64 now
    out = clean(force=args.force, store=args.store)
    for err in out.errors:
        print(f"harness: {err}", file=sys.stderr)
    print(f"clean: {out.runs} run(s) cleaned, {out.rules} iptables rule(s), {out.containers} "
          f"container(s), {out.networks} network(s) removed")
    files = [given] if given is not None else []
    for path in out.hosts_files:  # the hosts of dead runs on the ssh backend
        if given is None or Path(path).resolve() != given.path.resolve():
            try:
                files.append(load(path))
            except UsageError as e:
                print(f"harness: cannot clean the hosts of a dead run: {e}", file=sys.stderr)
    for hosts in files:
        from harness.controller.backends.ssh.backend import clean_hosts

        runs, rules, addrs = clean_hosts(hosts, force=args.force)
        print(f"clean --hosts {hosts.path}: {runs} run(s) removed from "
              f"{len(hosts.every_host())} host(s), {rules} iptables rule(s), {addrs} client "
              "address(es)")
    return 0


def cmd_hosts(args: argparse.Namespace) -> int:
    from harness.controller.backends.ssh import docker_hosts

    if args.hosts_command == "up":
        docker_hosts.up(args.count, args.file)
    else:
        docker_hosts.down(args.file if args.file.exists() or not args.all else None,
                          every=args.all)
    return 0


# serve / suite ------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from harness.presentation.serve import serve

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0 (any free one) to 65535")

    return serve(args.store, args.host, args.port, args.quiet)


def cmd_suite(args: argparse.Namespace) -> int:
    """Validate every entry, run them (or a shard's) in order, write JUnit, the index page and
    a summary; or merge shards' results."""
    from pathlib import Path

    from harness.presentation.parallel import check_jobs
    from harness.presentation.suite import load, numbers, parse_seeds, parse_shard

    if args.paths[0] == "merge":
        if args.shard is not None or args.dry_run or args.jobs is not None or args.seeds:
            raise UsageError("suite merge takes DIR... [--store DIR] [--junit PATH], not "
                             "--shard, --seeds, --jobs or --dry-run")
        if len(args.paths) < 2:
            raise UsageError("suite merge needs the directories the shards wrote")
        return suite_merge([Path(p) for p in args.paths[1:]], args.store, args.junit)
    if len(args.paths) > 1:
        raise UsageError(f"suite takes one file, got {len(args.paths)} (to merge shards: "
                         "harness suite merge DIR...)")
    path = Path(args.paths[0])
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    jobs = check_jobs(args.jobs)
    suite = load(path)
    if seeds is not None:
        suite = suite.reseeded(seeds)
    if args.shard is not None:
        suite = suite.sharded(parse_shard(args.shard))
        print(f"suite {suite.title}: {len(suite.entries)} of {suite.total} run(s) from {path}, "
              f"about {suite.wall_estimate(jobs) / 60:.0f} min; {len(suite.elsewhere)} skipped "
              f"here (they "
              f"run in the other shards): {numbers(suite.elsewhere) or 'none'}", flush=True)
    else:
        print(f"suite {suite.name}: {suite.total} run(s) from {path}, about "
              f"{suite.wall_estimate(jobs) / 60:.0f} min"
              f"{f' ({jobs} local runs at once)' if jobs > 1 else ''}", flush=True)
    if args.dry_run:
        for entry in suite.entries:
            print(f"  {entry.number:>3}. {entry.command()}  # expect {entry.expect}")
        return EXIT_VALID
    return suite_run(suite, args.store, args.junit, jobs)


def suite_run(suite: Suite, store: Path, junit: Path | None, jobs: int = 1) -> int:
    from harness.controller.store import Store
    from harness.presentation.suite import run_suite

    label = f"shard-{suite.shard.index}-of-{suite.shard.count}" if suite.shard else ""
    out_dir = Store(store).suites_dir(suite.name, label)
    started = time.time()
    outcomes = run_suite(suite, store, out_dir, jobs=jobs)
    return suite_finish(suite, outcomes, started, out_dir, junit)


def suite_merge(dirs: list[Path], store: Path, junit: Path | None) -> int:
    from harness.controller.store import Store
    from harness.presentation.suite_merge import find, merge

    shards = find(dirs)
    suite, outcomes, started = merge(shards)
    print(f"suite {suite.name}: merging {len(shards)} shard(s), {len(outcomes)} run(s)")
    for line in suite.merged:
        print(f"  {line}")
    out_dir = Store(store).suites_dir(suite.name, "merged")
    for o in outcomes:
        if not o.as_expected:
            print(f"  #{o.entry.number} {o.entry.label()}: expected {o.entry.expect}, got "
                  f"{o.verdict}  {o.report or o.log or ''}")
    return suite_finish(suite, outcomes, started, out_dir, junit)


def suite_finish(suite: Suite, outcomes: list[Outcome], started: float, out_dir: Path,
                 junit: Path | None) -> int:
    """Write the suite's JUnit XML, index page and summary; print the tally; the exit code."""
    from harness.presentation import suite_detection, suite_output
    from harness.presentation.suite import exit_code

    junit_path = junit if junit is not None else out_dir / "junit.xml"
    try:
        suite_output.write_outputs(out_dir, junit_path, suite, outcomes, started)
    except OSError as err:
        raise HarnessError(f"cannot write the suite's results: {err}") from None
    found = suite_detection.rows(outcomes)
    if any(len(r.runs) > 1 for r in found):
        print("\n".join(suite_detection.table(found)))
    print(f"suite {suite.title}: {suite_output.tally(outcomes)} "
          f"({sum(o.seconds for o in outcomes) / 60:.1f} min)")
    print(f"junit: {junit_path}")
    print(f"index: {out_dir / 'index.html'}")
    return exit_code(outcomes)


def cmd_zoo(args: argparse.Namespace) -> int:
    """Plan the matrix, run what was not run with the same settings and versions (--plan: only
    say what is due and reused), write the page (--markdown: its twin there too)."""
    from harness.controller.registry import Registry
    from harness.core.atomic import write_text
    from harness.presentation import zoo
    from harness.presentation.parallel import check_jobs

    registry = Registry()
    found = zoo.load(args.file or zoo.ZOO_FILE, registry)
    cells = zoo.plan(found, registry, zoo.seeds_of(args.seeds),
                     libraries=args.libraries.split(",") if args.libraries else None,
                     faults=args.faults.split(",") if args.faults else None,
                     overrides=zoo.overrides_of(args))
    jobs = check_jobs(args.jobs)
    command = "harness " + shlex.join(sys.argv[1:])
    for cell in (c for c in cells if c.chosen and c.note):
        print(f"  {cell.library.row} x {cell.fault}: not run: {cell.note}")
    try:
        todo = zoo.look(cells, args.store)
        made = sum(len(c.outcomes) for c in cells if c.chosen)
        print(f"zoo {found.name}: {len(todo)} run(s) to make, {made} already made", flush=True)
        if args.plan:
            print("\n".join(zoo.plan_lines(cells, todo)))
        else:
            zoo.run_zoo(found, cells, args.store, todo, jobs=jobs)
            page = zoo.write_pages(found, cells, args.store, command)
            print(f"zoo {found.name}: {len(todo)} run(s) made, {made} reused; page: {page}")
        if args.markdown:
            inside = args.markdown.resolve().is_relative_to(args.store.resolve())
            write_text(args.markdown, zoo.page_md(found, cells, args.markdown.resolve().parent
                                                  if inside else None, command))
            print(f"markdown: {args.markdown}")
    except OSError as err:  # a full disk: what finished is kept, the next call goes on from it
        raise HarnessError(f"zoo stopped: {err.strerror or err}"
                           f"{f': {err.filename}' if err.filename else ''} (the runs made "
                           "so far are kept: the next call reuses them)") from None
    stopped = any(o.verdict in ("interrupted", "skipped") for c in cells for o in c.outcomes)
    return EXIT_SETUP if stopped else EXIT_VALID  # a verdict is a finding, not a failure


COMMANDS = {"run": cmd_run, "explore": cmd_explore, "check": cmd_check, "export": cmd_export,
            "report": cmd_report, "list": cmd_list, "clean": cmd_clean, "serve": cmd_serve,
            "suite": cmd_suite, "hosts": cmd_hosts, "doctor": cmd_doctor, "setup": cmd_setup,
            "zoo": cmd_zoo}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
