"""lock-harness: a Jepsen-style black-box correctness harness for distributed locks.

The package is layered, and imports point down only (``lint-imports`` enforces it):

- :mod:`harness.cli`: the command line; the top.
- :mod:`harness.presentation`: report.html, ``serve``, ``suite``.
- :mod:`harness.controller`: spec, registry, run, store, backends.
- the roles, top-level packages beside this one in a checkout: ``workloads``, ``nemesis``,
  ``checker``, ``dbs``; an installed wheel holds them as ``harness.workloads`` and so on, and
  claims no generic top-level name (``setup.py`` moves them and their references at build).
- :mod:`harness.core`: the vocabulary every layer shares (history, errors, role protocols,
  capabilities, fault schedules).
"""
