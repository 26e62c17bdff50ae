"""A file of ours read whole, up to a size no file of its kind reaches: whatever keeps it from
being read (not there, a directory, unreadable, too big) is one line, as the caller's error."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import HarnessError


def read_capped(path: Path, limit: int, where: str, kind: str,
                error: type[HarnessError] = HarnessError) -> bytes:
    """The bytes of ``path``, at most ``limit``; ``where`` names it in the line, ``kind`` says
    what it should be ("TOML file", "test.json")."""
    try:
        with path.open("rb") as f:
            raw = f.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except IsADirectoryError:
        raise error(f"{where}: a directory, not a {kind}") from None
    except OSError as e:
        raise error(f"cannot read {where}: {e.strerror}") from None
    if len(raw) > limit:
        raise error(f"{where} is larger than {limit >> 20} MiB: not a {kind} of ours")
    return raw
