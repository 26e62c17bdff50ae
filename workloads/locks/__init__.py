"""Lock implementations, each a class that declares itself (name, summary, dbs, tokens).

The lock protocol (``Grant``, ``LockConfig``, ``Indeterminate``, ``LockRole``) lives in
:mod:`harness.core.locks`; its old home, ``workloads.locks.base``, was removed. A plugin that
still imports it gets one line saying where it went, not "No module named"."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED = {"workloads.locks.base": "harness.core.locks"}


class _Moved:
    """A finder asked last (after every real one failed): a moved module's old name is an
    ImportError naming its new home."""

    @staticmethod
    def find_spec(fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname in MOVED:
            raise ImportError(f"{fullname} was removed: import Grant, LockConfig, Indeterminate "
                              f"and LockRole from {MOVED[fullname]}", name=fullname)
        return None


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())
