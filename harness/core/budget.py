"""A memory budget beside the time budget: checking that would need more ends as ``unknown``,
with the reason, instead of the machine running out.

Three guards, from cheapest to last resort: a history file whose size alone says it cannot be
checked within the budget is refused before it is read; the linearizability search caps its
cache at the number of states the budget holds (:func:`states_for`); and the process's
address space is limited (``RLIMIT_AS``), so an allocation past the budget raises MemoryError,
which the checkers' composition turns into ``unknown``.
"""

from __future__ import annotations

import os
import resource

STATE_BYTES = 320  # a cache entry of the search, with its share of the set (measured)
FILE_FACTOR = 10  # a parsed history takes about this many times its size on disk
HEADROOM = 512 << 20  # the interpreter, its libraries and stacks, outside the budget
MIN_DEFAULT = 512 << 20


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 4 << 30


def default_memory() -> int:
    """A quarter of this machine's memory, and at least 512 MiB."""
    return max(MIN_DEFAULT, physical_memory() // 4)


def states_for(max_memory: int) -> int:
    return max(10_000, max_memory // STATE_BYTES)


def limit_memory(max_memory: int) -> None:
    """Cap this process's address space at the budget plus headroom (never raise the cap)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = max_memory + HEADROOM
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or want < soft:
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def file_fits(path: str | os.PathLike[str], max_memory: int) -> str | None:
    """None when a history file of this size can be checked within ``max_memory``."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None  # reading it will say what is wrong
    if size * FILE_FACTOR > max_memory:
        return (f"{size / 2**20:.0f} MiB on disk: checking it needs more than --max-memory "
                f"{max_memory / 2**20:.0f} MiB (raise --max-memory)")
    return None
