"""Write a file so that a reader (or a crash) sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

TYPE_CHECKING = False  # see harness/core/history.py
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path``: write it in the block; when the block ends without an
    error it is renamed over ``path``, otherwise removed."""
    from pathlib import Path  # not imported by a process that only reads

    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        tmp.replace(p)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_lines(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    """One line per item (each gets its newline), streamed, then renamed into place."""
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2) -> None:
    """``data`` as JSON (keys sorted, anything else as its ``str``), atomically."""
    import json

    write_text(path, json.dumps(data, indent=indent, sort_keys=True, default=str) + "\n")
