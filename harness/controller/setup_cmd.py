"""``harness setup``: installs what the chosen DBs, backends, fault families and external
clients need, from their own declarations (:mod:`harness.controller.needs`): their Debian
packages (each only if it is not installed), then for the docker backend the engine, the node
image and the libc Redis build (``docker/``; the libc Redis alone for clock faults without
the docker backend), then the clients' builds (cached by source).
The packages go first, one step after another (apt holds one lock); the builds then run at
once, the docker backend's steps as one job, each client as another, each job's output in a
log of its own, with a line as each ends and every 30 s while any runs. Idempotent: what is
there is said in a line and left alone. ``dry_run``: the commands only.

``setup.sh`` of a checkout is a venv plus ``harness setup --all``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.controller import needs
from harness.controller.backends import BACKENDS, backend_class
from harness.controller.packages import HARNESS, HOST, db_packages
from harness.controller.registry import Registry, default_registry, library_version
from harness.core import capabilities
from harness.core.errors import HarnessError, UsageError
from harness.core.shipped import shipped

LIBC = "the libc Redis"  # Redis built with MALLOC=libc: libfaketime hooks it (dbs/redis.py)


@dataclass
class Choice:
    """What to set up: names of each kind (``all``: every one)."""

    dbs: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    clients: list[str] = field(default_factory=list)
    python: list[str] = field(default_factory=list)  # pinned requirements (the zoo's extra)


def chosen(given: Iterable[str], known: Sequence[str], what: str,
           every: Sequence[str] | None = None) -> list[str]:
    """The names of a comma-separated option, ``all`` for ``every`` one (default: each known);
    UsageError for others."""
    names = [n for g in given for n in g.split(",") if n]
    if "all" in names:
        names = [*(known if every is None else every), *(n for n in names if n != "all")]
    for name in names:
        if name not in known:
            raise UsageError(f"unknown {what} {name!r}: use one of "
                             f"{', '.join(known)}, or all")
    return list(dict.fromkeys(names))


def choice(dbs: Iterable[str], backends: Iterable[str], faults: Iterable[str],
           clients: Iterable[str], everything: bool, reg: Registry) -> Choice:
    every = ["all"] if everything else []
    # all DBs: those whose packages are in Debian's archive; another repository's (apt_source,
    # not configured on a bare Debian, where its apt-get would fail) only by name
    debian = [n for n in reg.names("dbs") if reg.load("dbs", n).apt_source is None]
    return Choice(chosen([*dbs, *every], reg.names("dbs"), "db", debian),
                  chosen([*backends, *every], BACKENDS, "backend"),
                  chosen([*faults, *every], list(needs.families(reg)), "nemesis"),
                  chosen([*clients, *every], list(needs.clients(reg)), "client"))


def declared(c: Choice, reg: Registry) -> dict[str, list[str]]:
    """Every package the choice declares, the harness's own first, each once, with the
    commands or paths it is declared for (a package is there when one of them is)."""
    out: dict[str, list[str]] = {p: [] for p in (*HARNESS, *HOST)}

    def add(decl: dict[str, str]) -> None:
        for what, package in decl.items():
            out.setdefault(package, []).append(what)

    for name in c.dbs:
        db = reg.load("dbs", name)
        add(db.debian_packages)
        out.update({p: out.get(p, []) for p in db_packages(db)})  # libfaketime's, by name
    for name in c.backends:
        add(getattr(backend_class(name), "debian_packages", {}))
    families = needs.families(reg)
    for name in c.faults:
        add(needs.fault_packages(families[name]))
    client_locks = needs.clients(reg)
    for name in c.clients:
        for lock in client_locks[name]:
            add(getattr(lock, "debian_packages", {}))
    return out


def installed(package: str, whats: Sequence[str] = ()) -> bool:
    """Is ``package`` installed, or one of the commands or paths it is declared for there
    (a Node of its own instead of Debian's nodejs, say)?"""
    unique = dict.fromkeys(whats, package)  # several roles may declare the same command
    if unique and len(needs.absent(unique)) < len(unique):
        return True
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True,
                          text=True, check=False)
    return "install ok installed" in proc.stdout


Step = tuple[str, list[str], bool]  # what, its argv, and whether it is already done here


def commands(c: Choice, reg: Registry) -> list[Step]:
    """(what, argv, done) of each step of the choice, in order: the apt step (for what lacks,
    or done: every declared package), a DB's own server install, docker's, the clients'
    builds (cached: a build that is there says so and does nothing)."""
    wanted = declared(c, reg)
    missing = [p for p, whats in wanted.items() if not installed(p, whats)]
    packages = " ".join(missing or wanted)
    steps: list[Step] = [(
        f"installing Debian packages: {packages}" if missing
        else f"Debian packages: all {len(wanted)} installed",
        ["sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get "
         f"install -y -qq --no-install-recommends {packages} >/dev/null"], not missing)]
    for name in c.dbs:  # a server from another registry than Debian's (dynalite from npm)
        db = reg.load("dbs", name)
        install = getattr(db, "install_argv", None)
        if install is not None:
            steps.append((f"db {name}'s server ({' '.join(install())})", install(),
                          db.unavailable() is None))
    libc = ["bash", str(shipped("docker") / "build_redis_libc.sh")]
    if "docker" in c.backends:
        docker = shipped("docker")
        steps += [("the docker engine (docker/engine.sh)", ["bash", str(docker / "engine.sh")],
                   False),
                  ("the node image (docker/build_image.py)",
                   [sys.executable, str(docker / "build_image.py")], False),
                  (f"{LIBC} (docker/build_redis_libc.sh)", libc, False)]
    elif any(capabilities.ClockFaults in getattr(needs.families(reg)[f], "requires", ())
             for f in c.faults):  # clock faults on the local backend's Redis
        steps.append((f"{LIBC} for clock faults (build_redis_libc.sh)", libc, False))
    if c.python:  # into this harness's own environment
        steps.append((f"python packages: {' '.join(c.python)}",
                      [sys.executable, "-m", "pip", "install", "-q",
                       "--disable-pip-version-check", *c.python],
                      all(pinned(r) for r in c.python)))
    steps += [(f"lock client {name}", [sys.executable, "-m", "workloads.external.builds", name],
               False) for name in c.clients]
    return steps


def pinned(requirement: str) -> bool:
    """Is ``NAME==VERSION`` (or ``NAME``) installed here, at that version?"""
    name, _, version = requirement.partition("==")
    found = library_version(name.split("[")[0].strip())
    return found is not None and (not version or found == version.strip())


def jobs(steps: Sequence[Step]) -> dict[str, list[Step]]:
    """The builds of ``steps`` that may run at once, by name: the docker backend's steps in
    their order (the image needs the engine) as one, each lock client as one of its own."""
    out: dict[str, list[Step]] = {}
    for step in steps:
        if "(docker/" in step[0]:
            out.setdefault("docker backend", []).append(step)
        elif step[0].startswith("lock client"):
            out[step[0]] = [step]
        elif step[0].startswith(LIBC):
            out[LIBC] = [step]
    return out


def run_jobs(builds: dict[str, list[Step]], env: dict[str, str]) -> dict[str, Path]:
    """Run each job's steps in order, the jobs at once, each one's output into its own log;
    a line as each ends and every 30 s while any runs. The log of each job that failed (the
    logs are removed when none did)."""
    logs = Path(tempfile.mkdtemp(prefix="lock-harness-setup-"))
    print(f"setup: building {', '.join(builds)}{' at once' if len(builds) > 1 else ''} (logs: "
          f"{logs}/, kept if one fails)", flush=True)
    start = time.monotonic()
    failed: dict[str, Path] = {}

    def work(name: str, job: list[Step]) -> None:
        log = logs / (name.split()[-1] + ".log")
        with log.open("w") as out:
            for what, argv, _ in job:
                print(f"setup: {what}: {shlex.join(argv)}", file=out, flush=True)
                code = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, check=False).returncode
                if code != 0:
                    failed[name] = log
                    print(f"setup: {name}: {what} failed (exit {code}) after "
                          f"{time.monotonic() - start:.0f} s; its log: {log}", flush=True)
                    return
        print(f"setup: {name}: done in {time.monotonic() - start:.0f} s", flush=True)

    threads = {n: threading.Thread(target=work, args=(n, j), daemon=True)
               for n, j in builds.items()}
    for t in threads.values():
        t.start()
    while any(t.is_alive() for t in threads.values()):
        tick = time.monotonic() + 30
        for t in threads.values():
            t.join(max(0.0, tick - time.monotonic()))
        running = [n for n, t in threads.items() if t.is_alive()]
        if running:
            print(f"setup: still building after {time.monotonic() - start:.0f} s: "
                  f"{', '.join(running)}", flush=True)
    for name, log in failed.items():
        tail = log.read_text(errors="replace").splitlines()[-15:]
        print("\n".join(f"  {name}| {line}" for line in tail), file=sys.stderr)
    if not failed:
        shutil.rmtree(logs)
    return failed


def setup(c: Choice, dry_run: bool = False, reg: Registry | None = None) -> int:
    """Run (or, ``dry_run``, print: every step's command, one already done marked so) the
    steps, the builds at once (:func:`jobs`); HarnessError (exit 3) naming a failed one."""
    reg = reg or default_registry()
    steps = commands(c, reg)
    if not (c.dbs or c.backends or c.faults or c.clients or c.python):
        print("setup: nothing chosen but the harness's own packages (--db, --backend, "
              "--nemesis, --clients NAME,... or --all choose more; `harness doctor` shows "
              "what lacks)")
    env = {**os.environ, "LOCK_HARNESS_PYTHON": sys.executable}
    builds = jobs(steps)
    for what, argv, done in steps:
        if dry_run:
            print(shlex.join(argv) + (f"  # already done: {what}" if done else ""))
        elif done:
            print(f"setup: {what}")
        elif not any(s[0] == what for job in builds.values() for s in job):
            if argv[0] == "sh" and os.geteuid() != 0:
                raise HarnessError(f"{what}: needs root (apt-get): run as root")
            print(f"setup: {what}", flush=True)
            code = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                                  check=False).returncode
            if code != 0:
                raise HarnessError(f"{what} failed (exit {code})")
    if dry_run:
        return 0
    failed = run_jobs(builds, env) if builds else {}
    if failed:
        clients = [n.split()[-1] for n in failed if n.startswith("lock client")]
        retry = (["--backend docker"] if "docker backend" in failed else []) + (
            [f"--clients {','.join(clients)}"] if clients else [])
        raise HarnessError(f"build failed: {', '.join(failed)} (see above; retry with "
                           f"`harness setup {' '.join(retry)}`)")
    todo = any(not done for _, _, done in steps)
    print("setup: done" if todo else "setup: nothing to do")
    return 0
