"""A filesystem that forgets what was not synced: a FUSE passthrough to a real directory that
holds written data in its own cache until it is synced, and on command drops it (a power loss).

Every operation passes through to the backing directory at once, except file data: a write
goes to a per-file cache (its extents, in order, and the file's size as its writers see it),
reads see the backing file with the cache laid over it, and the cache reaches the backing file
(written and fsynced there) on ``fsync``/``fdatasync`` of any handle of the file, at each write
of a handle opened ``O_SYNC``/``O_DSYNC``, and at a clean unmount. ``sync(2)`` cannot be seen:
Linux sends a FUSE filesystem no syncfs, so only the per-file calls count (as on LazyFS).

Metadata (create, mkdir, unlink, rename, link, chmod, ...) is durable at once, as if the
journal of an ext4 committed it with the call: a file created and never synced survives a drop
*present and empty* (ext4's "zero-length file" outcome after a crash, and LazyFS's), a file
renamed after its fsync survives under its new name. A rename that replaces an existing file
first syncs the data of the file it moves (ext4's ``auto_da_alloc``: the replace-by-rename
idiom keeps the new content); a rename to a free name does not.

:meth:`SyncFS.drop` discards every cache and says what it dropped: ``{path: bytes}``;
:meth:`SyncFS.sync_all` writes every cache back and says the same of what it wrote. The
backing directory may be the mount point itself: the process that mounts changes into it first
and reaches it with relative paths (:mod:`harness.controller.syncfs_runner`).
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from mfusepy import FuseOSError, Operations, fuse_get_context

SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
STAT_KEYS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size",
             "st_blocks", "st_blksize")


@dataclass
class Pending:
    """A file's unsynced data: its extents in write order over the backing file's first ``cut``
    bytes (less than its length after an unsynced truncate), and its size as written."""

    path: str
    fd: int  # a descriptor of the backing file of its own, to sync through
    size: int
    cut: int
    writes: list[tuple[int, bytearray]] = field(default_factory=list)

    def unsynced(self) -> int:
        return sum(len(d) for _, d in self.writes) + max(0, os.fstat(self.fd).st_size - self.cut)

    def write(self, data: bytes, offset: int) -> None:
        if self.writes and self.writes[-1][0] + len(self.writes[-1][1]) == offset:
            self.writes[-1][1].extend(data)  # an append to the last extent: one extent
        else:
            self.writes.append((offset, bytearray(data)))
        self.size = max(self.size, offset + len(data))

    def truncate(self, length: int) -> None:
        self.size, self.cut = length, min(self.cut, length)
        self.writes = [(o, d[:length - o]) for o, d in self.writes if o < length]

    def read(self, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        out = bytearray(os.pread(self.fd, max(0, min(end, self.cut) - offset), offset)
                        if offset < self.cut else b"")
        out.extend(bytes(end - offset - len(out)))
        for o, d in self.writes:
            lo, hi = max(o, offset), min(o + len(d), end)
            if lo < hi:
                out[lo - offset:hi - offset] = d[lo - o:hi - o]
        return bytes(out)

    def sync(self, datasync: bool) -> None:
        if os.fstat(self.fd).st_size > self.cut:
            os.ftruncate(self.fd, self.cut)
        for o, d in self.writes:
            os.pwrite(self.fd, d, o)
        if os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)
        (os.fdatasync if datasync else os.fsync)(self.fd)


def backing_flags(flags: int) -> int:
    """How the backing file is opened: read-write whenever written (the cache reads through
    it), never appending (the kernel gives each write its offset) nor synced (the cache is)."""
    if flags & os.O_ACCMODE == os.O_WRONLY:
        flags = flags & ~os.O_ACCMODE | os.O_RDWR
    return flags & ~(os.O_APPEND | SYNC_FLAGS)


class SyncFS(Operations):  # type: ignore[misc]
    """The filesystem over the backing directory ``root`` (paths are ``root + path``)."""

    use_ns = True

    def __init__(self, root: str) -> None:
        self.root = root
        self.mu = threading.Lock()
        self.handles: dict[int, tuple[tuple[int, int], bool]] = {}  # fd -> (inode, O_SYNC)
        self.pending: dict[tuple[int, int], Pending] = {}

    def _p(self, path: str) -> str:
        return self.root + path

    # data ------------------------------------------------------------------------------------
    def _handle(self, path: str, fd: int, flags: int) -> int:
        st = os.fstat(fd)
        with self.mu:
            self.handles[fd] = ((st.st_dev, st.st_ino), bool(flags & SYNC_FLAGS))
        return fd

    def open(self, path: str, flags: int) -> int:
        return self._handle(path, os.open(self._p(path), backing_flags(flags)), flags)

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        fd = os.open(self._p(path), backing_flags(flags) | os.O_CREAT, mode)
        self._own(path)
        return self._handle(path, fd, flags)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self.mu:
            p = self.pending.get(self.handles[fh][0])
            if p is not None:
                return p.read(size, offset)
        return os.pread(fh, size, offset)

    def _pending(self, path: str, fh: int) -> Pending:
        key = self.handles[fh][0]
        p = self.pending.get(key)
        if p is None:
            size = os.fstat(fh).st_size
            p = self.pending[key] = Pending(path, os.dup(fh), size, size)
        return p

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.mu:
            p = self._pending(path, fh)
            p.write(data, offset)
            if self.handles[fh][1]:
                self._sync(fh, True)
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is None:
            fh = os.open(self._p(path), os.O_RDWR)
            self._handle(path, fh, 0)
            try:
                return self.truncate(path, length, fh)
            finally:
                self.release(path, fh)
        with self.mu:
            self._pending(path, fh).truncate(length)
        return 0

    def _sync(self, fh: int, datasync: bool) -> None:
        p = self.pending.pop(self.handles[fh][0], None)
        if p is not None:
            try:
                p.sync(datasync)
            finally:
                os.close(p.fd)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.mu:
            self._sync(fh, bool(datasync))
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close(2) syncs nothing

    def release(self, path: str, fh: int) -> int:
        with self.mu:
            self.handles.pop(fh, None)
        os.close(fh)
        return 0

    def drop(self) -> dict[str, int]:
        """Forget every unsynced byte (a power loss): ``{path: bytes dropped}``."""
        with self.mu:
            lost = {p.path: p.unsynced() for p in self.pending.values()}
            for p in self.pending.values():
                os.close(p.fd)
            self.pending.clear()
        return lost

    def sync_all(self) -> dict[str, int]:
        """Write every unsynced byte back (a clean unmount, or the kernel's writeback of a
        server that has run a while): ``{path: bytes written back}``."""
        with self.mu:
            wrote = {p.path: p.unsynced() for p in self.pending.values()}
            for p in self.pending.values():
                p.sync(False)
                os.close(p.fd)
            self.pending.clear()
        return wrote

    def destroy(self, path: str) -> None:
        self.sync_all()  # a clean unmount writes everything back

    # metadata: durable at once ---------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._p(path))
        attrs = {k: getattr(st, k) for k in STAT_KEYS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        with self.mu:
            p = self.pending.get((st.st_dev, st.st_ino))
            if p is not None:
                attrs["st_size"] = p.size
        return attrs

    def rename(self, old: str, new: str) -> int:
        with self.mu:
            if os.path.lexists(self._p(new)) and not os.path.isdir(self._p(old)):
                st = os.lstat(self._p(old))
                p = self.pending.pop((st.st_dev, st.st_ino), None)
                if p is not None:  # replace-by-rename: the moved file's data goes first
                    p.sync(True)
                    os.close(p.fd)
            os.rename(self._p(old), self._p(new))
            for p in self.pending.values():
                if p.path == old or p.path.startswith(old + "/"):
                    p.path = new + p.path[len(old):]
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._p(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._p(path))

    def _own(self, path: str) -> None:
        """What a caller other than root makes is the caller's (this process runs as root)."""
        uid, gid, _ = fuse_get_context()
        if uid:
            os.lchown(self._p(path), uid, gid)

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._p(path), mode)
        self._own(path)
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        os.mknod(self._p(path), mode, dev)
        self._own(path)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._p(path))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._p(path))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._p(target))
        self._own(target)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self._p(source), self._p(target))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._p(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._p(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._p(path), ns=times)
        return 0

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._p(path), amode):
            raise FuseOSError(errno.EACCES)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return 0  # metadata is durable already

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._p(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                            "f_favail", "f_ffree", "f_files", "f_flag",
                                            "f_frsize", "f_namemax")}
