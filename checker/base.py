"""What every checker declares: one class in one file, found by the registry by ``name``.

A checker is a class with a pure ``check(history, **params) -> {"valid": ..., ...}`` static
method (the workload names the checker and its parameters) and these class attributes, which
the registry checks when it loads the class and presentation reads (it keeps no table of
checker names; a result of a checker that is not installed is shown with its raw keys):

- ``name``, ``summary``: as every role;
- ``figures``: result key -> words, the scalar figures of its result: the summary line prints
  each as ``key value``; a figure with words (not None) that is a non-zero int is also a chip
  of serve and the report, ``value words`` (``3 lock-overlap``);
- ``violations``: result key -> (singular, plural), the kinds of violation it lists (each item
  with an ``explanation``): the summary prints the first of each, incidents count them in these
  words (``1 lock overlap, 33 resource interleavings``);
- ``caveats``: result keys of lists of what its verdict does not cover (a fault that did not
  bite, a lock it could not judge): the summary prints the first three of each;
- ``budgeted``: it takes the run's ``time_limit`` and ``max_states``.

A plugin need not subclass :class:`Checker`; it is the shape and the defaults.
"""

from __future__ import annotations

TYPE_CHECKING = False  # see harness/core/history.py: `harness check FILE` loads this
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import ClassVar


MAX_LISTED = 1000  # items of one violation kind a result lists (the first ones; its count is exact)


class Checker:
    name: ClassVar[str]
    summary: ClassVar[str]
    figures: ClassVar[Mapping[str, str | None]] = {}
    violations: ClassVar[Mapping[str, tuple[str, str]]] = {}
    caveats: ClassVar[tuple[str, ...]] = ()
    budgeted: ClassVar[bool] = False
