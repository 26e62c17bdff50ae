"""The filesystem that forgets what was not synced, on its own (issue 27's acceptance): mounted
over a directory by its runner process, written through the mount with plain system calls,
dropped, then read back both through the mount and from the backing directory once unmounted.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.controller.procs import ProcessTable
from harness.controller.store import RunDir
from harness.controller.syncfs_mounts import SyncMounts, mounted, unavailable, unmount_recorded

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[tuple[SyncMounts, Path]]:
    yield from mounted_over(tmp_path, tmp_path / "data")


@pytest.fixture
def open_fs(tmp_path: Path) -> Iterator[tuple[SyncMounts, Path]]:
    """Mounted over a directory every user reaches (pytest's own are root's alone)."""
    data = Path(tempfile.mkdtemp(prefix="syncfs-"))
    data.chmod(0o777)
    try:
        yield from mounted_over(tmp_path, data)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def mounted_over(tmp_path: Path, data: Path) -> Iterator[tuple[SyncMounts, Path]]:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    data.mkdir(exist_ok=True)
    (data / "before").write_bytes(b"there before the mount")
    procs = ProcessTable(run.pids)
    mounts = SyncMounts(run, procs)
    mounts.mount("n1", data)
    try:
        yield mounts, data
    finally:
        unmount_recorded(run.path)
        procs.kill_all()


def write(path: Path, data: bytes, *, sync: bool = False, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_writes_are_dropped_synced_ones_stay(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "synced", b"kept", sync=True)
    write(data / "synced", b"-lost", flags=os.O_APPEND)
    write(data / "unsynced", b"never synced")
    assert (data / "synced").read_bytes() == b"kept-lost"  # the writer sees its writes
    assert (data / "before").read_bytes() == b"there before the mount"
    dropped = mounts.drop("n1")
    assert dropped["files"] == {"/synced": 5, "/unsynced": 12}
    assert dropped["bytes"] == 17
    assert (data / "synced").read_bytes() == b"kept"
    # created but never synced: present and empty (metadata is durable at once, data not)
    assert (data / "unsynced").read_bytes() == b""
    record = (mounts.dir / "n1.jsonl").read_text().splitlines()
    assert [json.loads(line)["bytes"] for line in record] == [17]
    assert mounts.drop("n1")["files"] == {}  # nothing left to lose


def test_a_write_back_makes_what_was_written_durable(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "setup", b"written while the server set up")
    back = mounts.write_back("n1")
    assert back["files"] == {"/setup": 31} and back["bytes"] == 31
    write(data / "setup", b"+later", flags=os.O_APPEND)
    assert mounts.drop("n1")["files"] == {"/setup": 6}
    assert (data / "setup").read_bytes() == b"written while the server set up"
    record = (mounts.dir / "n1.jsonl").read_text().splitlines()
    assert [json.loads(line)["bytes"] for line in record] == [6]  # drops alone are recorded


def test_directories_list_through_the_mount(fs: tuple[SyncMounts, Path]) -> None:
    _, data = fs
    (data / "wal.tmp").mkdir()
    write(data / "wal.tmp" / "0.wal", b"header", sync=True)
    os.rename(data / "wal.tmp", data / "wal")  # etcd makes its WAL directory so
    assert sorted(os.listdir(data)) == ["before", "wal"]
    assert os.listdir(data / "wal") == ["0.wal"]


def test_o_sync_writes_are_synced_each(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "dsync", b"durable", flags=os.O_DSYNC)
    assert mounts.drop("n1")["files"] == {}
    assert (data / "dsync").read_bytes() == b"durable"


def test_rename_after_fsync_keeps_the_new_name(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "tmp", b"manifest", sync=True)
    os.rename(data / "tmp", data / "manifest")
    mounts.drop("n1")
    assert (data / "manifest").read_bytes() == b"manifest"
    assert not (data / "tmp").exists()


def test_rename_to_a_free_name_does_not_sync(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "tmp", b"unsynced")
    os.rename(data / "tmp", data / "moved")
    assert mounts.drop("n1")["files"] == {"/moved": 8}
    assert (data / "moved").read_bytes() == b""


def test_rename_over_a_file_syncs_the_moved_data_first(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "conf", b"old", sync=True)
    write(data / "conf.tmp", b"new")
    os.rename(data / "conf.tmp", data / "conf")  # ext4's auto_da_alloc: replace-by-rename
    assert mounts.drop("n1")["files"] == {}
    assert (data / "conf").read_bytes() == b"new"


def test_unsynced_truncate_is_dropped(fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "log", b"0123456789", sync=True)
    os.truncate(data / "log", 4)
    with open(data / "log", "ab") as fh:
        fh.write(b"xy")
    assert (data / "log").read_bytes() == b"0123xy"
    mounts.drop("n1")
    assert (data / "log").read_bytes() == b"0123456789"


def test_unmount_writes_back_and_leaves_the_directory(tmp_path: Path,
                                                      fs: tuple[SyncMounts, Path]) -> None:
    mounts, data = fs
    write(data / "late", b"clean shutdown")
    mounts.unmount_all()
    assert not mounted(data)
    assert mounts.procs.pid("syncfs-n1") is None
    assert (data / "late").read_bytes() == b"clean shutdown"


def test_what_a_user_makes_is_the_users(open_fs: tuple[SyncMounts, Path]) -> None:
    _, data = open_fs
    nobody = pwd.getpwnam("nobody")
    made = subprocess.run(["sh", "-c", f"mkdir {data}/d && echo x > {data}/d/f"],
                          user=nobody.pw_uid, group=nobody.pw_gid, capture_output=True,
                          text=True, check=False)
    assert made.returncode == 0, made.stderr
    assert {(data / p).stat().st_uid for p in ("d", "d/f")} == {nobody.pw_uid}
