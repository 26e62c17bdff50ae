"""`harness list`: the roles (DBs, locks, workloads, nemeses, checkers, resources) the registry
knows, with where each comes from; `--lock NAME` / `--nemesis NAME`: one of them in detail."""

from __future__ import annotations

from typing import Any

from harness.controller.registry import library_version
from harness.core.errors import UsageError

LIST_KINDS = (("dbs", "dbs"), ("locks", "locks"), ("workloads", "workloads"),
              ("nemeses", "nemeses"), ("checkers", "checkers"), ("resources", "resources"))


def list_roles(lock: str | None = None, nemesis: str | None = None,
               db: str | None = None) -> int:
    """Every role of every kind, one line each (or, with ``lock``, ``nemesis`` or ``db``, that
    one in detail)."""
    from harness.controller.registry import DISTRIBUTION, default_registry

    reg = default_registry()
    if db:
        return list_db(reg, db)
    if lock or nemesis:
        return list_one(reg, "locks" if lock else "nemeses", lock or nemesis)
    for kind, title in LIST_KINDS:
        print(f"{title}:")
        if kind == "nemeses":
            print(f"  {'none':<22} no faults: the baseline every lock should pass")
        for entry in reg.entries(kind):
            summary = reg.summary(kind, entry.name)
            tags = []
            if kind == "locks":
                tags += lock_tags(reg, entry.name)
            if entry.distribution != DISTRIBUTION:
                tags.append(f"from {entry.origin}")
            tag = f" [{', '.join(tags)}]" if tags else ""
            print(f"  {entry.name:<22} {summary}{tag}")
        if kind == "locks":
            print(f"  {'package.module:Class':<22} your own lock (see README)")
            print(f"  {'exec:PATH':<22} a lock program in any language (docs/clients.md)")
    for conflict in reg.conflicts:
        print(f"note: {conflict}")
    return 0


def lock_tags(reg: Any, name: str) -> list[str]:
    """``tokens``; for an external client (a program), whether it is built here."""
    try:
        cls = reg.load("locks", name)
    except UsageError:
        return []
    tags = ["tokens"] if getattr(cls, "tokens", False) else []
    library = getattr(cls, "library", "")
    if library:  # the library it wraps (the zoo's): its version here, or how to install it
        tags.append(f"{library} {library_version(library) or 'NOT INSTALLED'}")
    if getattr(cls, "external", False):
        built = reg.lock_unavailable(name) is None
        tags.append("external, built" if built else "external, NOT BUILT: python -m "
                    f"workloads.external.builds {getattr(cls, 'build', name)}")
    return tags


def list_db(reg: Any, name: str) -> int:
    """One DB in detail: its nodes and its persistence modes (``--persistence``), in its words."""
    entry = reg.entry("dbs", name)
    cls = reg.load("dbs", name)
    print(f"{entry.name}: {getattr(cls, 'summary', '') or '(no summary)'}")
    print(f"  from {entry.origin} ({entry.target})")
    print(f"  nodes: {cls.default_nodes} by default, at least {cls.min_nodes}")
    words = getattr(cls, "persistence_words", {}) or {}
    print("  persistence (--persistence MODE):")
    for mode in cls.persistence_modes:
        print(f"    {mode:<20} {words.get(mode, '')}".rstrip())
    return 0


def list_one(reg: Any, kind: str, name: str) -> int:
    """One role in detail: what it is, where it comes from, what it declares, its options."""
    entry = reg.entry(kind, name)
    cls = reg.load(kind, name)
    print(f"{entry.name}: {getattr(cls, 'summary', '') or '(no summary)'}")
    print(f"  from {entry.origin} ({entry.target})")
    if kind == "locks":
        dbs = reg.lock_dbs(name)
        print(f"  dbs: {', '.join(dbs) if dbs else 'any'}")
        print(f"  fencing tokens: {'yes' if reg.lock_tokens(name) else 'no'}")
        defaults = getattr(cls, "workload_defaults", None) or {}
        if defaults:
            print("  used with: " + ", ".join(f"{k} {v:g}" for k, v in defaults.items()))
        errors = getattr(cls, "timeout_errors", None) or ()
        if errors:
            print("  timeout errors (fail): " + ", ".join(e.__name__ for e in errors))
        if getattr(cls, "external", False):
            unavailable = reg.lock_unavailable(name)
            print("  a program (docs/clients.md): "
                  f"{'built' if unavailable is None else unavailable}")
        flag = "--lock-opt"
    else:
        requires = reg.nemesis_requires(name)
        if requires:
            from harness.core.capabilities import describe

            print("  requires: " + ", ".join(describe(c) for c in requires))
        targets = getattr(cls, "targets", ()) or ()
        print(f"  targets: {', '.join(targets) if targets else 'its own choice only'}")
        flag = "--nemesis-opt"
    options = getattr(cls, "options", None) or {}
    if options:
        print(f"  options ({flag} KEY=VALUE):")
        for key, option in options.items():
            print(f"    {key:<20} {option.describe()}")
    else:
        print("  options: none")
    return 0
