"""``harness setup``: installs what the chosen DBs, backends, fault families and external
clients need, from their own declarations (:mod:`harness.controller.needs`): their Debian
packages (each only if it is not installed), then for the docker backend the engine, the node
image and the libc Redis build (``docker/``), then the clients' builds (cached by source).
Idempotent: what is there is said in a line and left alone. ``dry_run``: the commands only.

``setup.sh`` of a checkout is a venv plus ``harness setup --all``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.controller import needs
from harness.controller.backends import BACKENDS, backend_class
from harness.controller.packages import HARNESS, HOST, db_packages
from harness.controller.registry import Registry, default_registry
from harness.core.errors import HarnessError, UsageError
from harness.core.shipped import shipped


@dataclass
class Choice:
    """What to set up: names of each kind (``all``: every one)."""

    dbs: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    clients: list[str] = field(default_factory=list)


def chosen(given: Iterable[str], known: Sequence[str], what: str) -> list[str]:
    """The names of a comma-separated option, ``all`` for every one; UsageError for others."""
    names = [n for g in given for n in g.split(",") if n]
    if "all" in names:
        return list(known)
    for name in names:
        if name not in known:
            raise UsageError(f"unknown {what} {name!r}: use one of "
                             f"{', '.join(known)}, or all")
    return list(dict.fromkeys(names))


def choice(dbs: Iterable[str], backends: Iterable[str], faults: Iterable[str],
           clients: Iterable[str], everything: bool, reg: Registry) -> Choice:
    every = ["all"] if everything else []
    return Choice(chosen([*dbs, *every], reg.names("dbs"), "db"),
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
    if "docker" in c.backends:
        docker = shipped("docker")
        steps += [("the docker engine (docker/engine.sh)", ["bash", str(docker / "engine.sh")],
                   False),
                  ("the node image (docker/build_image.py)",
                   [sys.executable, str(docker / "build_image.py")], False),
                  ("the libc Redis (docker/build_redis_libc.sh)",
                   ["bash", str(docker / "build_redis_libc.sh")], False)]
    steps += [(f"lock client {name}", [sys.executable, "-m", "workloads.external.builds", name],
               False) for name in c.clients]
    return steps


def setup(c: Choice, dry_run: bool = False, reg: Registry | None = None) -> int:
    """Run (or, ``dry_run``, print: every step's command, one already done marked so) the
    steps; HarnessError (exit 3) naming a failed one."""
    reg = reg or default_registry()
    steps = commands(c, reg)
    if not (c.dbs or c.backends or c.faults or c.clients):
        print("setup: nothing chosen but the harness's own packages (--db, --backend, "
              "--nemesis, --clients NAME,... or --all choose more; `harness doctor` shows "
              "what lacks)")
    env = {**os.environ, "LOCK_HARNESS_PYTHON": sys.executable}
    failed: list[str] = []
    for what, argv, done in steps:
        if dry_run:
            print(shlex.join(argv) + (f"  # already done: {what}" if done else ""))
            continue
        if done:
            print(f"setup: {what}")
            continue
        if argv[0] == "sh" and os.geteuid() != 0:
            raise HarnessError(f"{what}: needs root (apt-get): run as root")
        print(f"setup: {what}", flush=True)
        code = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, check=False).returncode
        if code != 0 and what.startswith("lock client"):
            failed.append(what.split()[-1])
        elif code != 0:
            raise HarnessError(f"{what} failed (exit {code})")
    if failed:
        raise HarnessError(f"lock client build failed: {' '.join(failed)} (see above; retry "
                           f"with `harness setup --clients {','.join(failed)}`)")
    if not dry_run:
        todo = any(not done for _, _, done in steps)
        print("setup: done" if todo else "setup: nothing to do")
    return 0
