"""ZOOKEEPER-2332: a ZooKeeper that lost its power between creating a new transaction log and
its first fsync finds that log empty, and 3.8.0 (Debian's) refuses to start: its header cannot
be read (EOFException in ``FileHeader.deserialize``). Upstream fixed it in 3.9.3 (apache/
zookeeper PR #2141, 2024; no 3.8 release has it, 3.8.6 included): when the log it reads last
-- the one with the highest zxid in its name -- has length 0, it deletes it and starts from
what came before; an empty log that is not the last, or a last one holding anything at all (a
header cut short included), is corruption, and it still refuses to start.

The harness makes the same decision, no wider, after a power loss and before the restart
(:meth:`dbs.zookeeper.ZooKeeperDB.repair_before_restart`): :func:`empty_tail_log` decides,
:func:`move_aside` moves the file out of the data directory into the run's, keeping it as
evidence. Nothing acknowledged is lost by it: a transaction is acknowledged only once the log
holding it was flushed (and, with forceSync, fsynced), and a log that kept no byte held none.

Which files are logs is ZooKeeper's own rule (``Util.getZxidFromName``): a name split on dots
whose first part is ``log`` and whose second parses as a hexadecimal long; the rest of the name
does not count, so ``log.1a.old`` is the log of zxid 0x1a to ZooKeeper and a file moved aside
must leave the directory, not be renamed inside it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

LOG_DIR = "version-2"  # where ZooKeeper keeps its logs and snapshots under dataDir
LONG = 1 << 63


def log_zxid(name: str) -> int | None:
    """The zxid a transaction log's file name starts at, as ZooKeeper reads it (Java's
    ``Long.parseLong(part, 16)``: an optional sign, hexadecimal digits, within a signed long);
    None when ZooKeeper would not take the file for a log (its zxid would be negative)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "log":
        return None
    digits = parts[1]
    body = digits[1:] if digits[:1] in ("+", "-") else digits
    if not body or any(c not in "0123456789abcdefABCDEF" for c in body):
        return None
    value = int(digits, 16)
    return value if 0 <= value < LONG else None


def empty_tail_log(sizes: Mapping[str, int]) -> str | None:
    """The log ZooKeeper's fix would delete, given the directory's files and their sizes: the
    log with the highest zxid, if it is empty and no other log shares that zxid (ZooKeeper's
    order between two such names is not defined, so neither is the tail); None otherwise."""
    logs = [(zxid, name) for name in sizes if (zxid := log_zxid(name)) is not None]
    if not logs:
        return None
    top = max(z for z, _ in logs)
    tails = [name for z, name in logs if z == top]
    if len(tails) != 1 or sizes[tails[0]] != 0:
        return None
    return tails[0]


def listing(directory: Path) -> dict[str, int]:
    """The regular files of ``directory`` and their sizes (nothing when it does not exist)."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return {}
    return {e.name: e.stat(follow_symlinks=False).st_size for e in entries
            if e.is_file(follow_symlinks=False)}


def move_aside(path: Path, aside: Path) -> Path:
    """Move ``path`` into the directory ``aside`` (made if need be) under a name not taken yet
    there, across filesystems (a copy, then the original removed); where it went."""
    aside.mkdir(parents=True, exist_ok=True)
    target = aside / path.name
    n = 1
    while target.exists():
        n += 1
        target = aside / f"{path.name}~{n}"
    shutil.move(str(path), str(target))
    return target


def repair(data_dir: Path, aside: Path) -> list[str]:
    """Move the empty tail log of ``data_dir`` (ZooKeeper's dataDir) aside, as upstream's fix
    deletes it; what was done, in words (nothing: nothing to do)."""
    logs = data_dir / LOG_DIR
    name = empty_tail_log(listing(logs))
    if name is None:
        return []
    where = move_aside(logs / name, aside)
    return [f"ZOOKEEPER-2332: empty tail log {LOG_DIR}/{name} moved aside ({where.name} in "
            f"{aside.parent.name}/{aside.name})"]
