"""The download's `.part` file, held by this agent alone from claim to rename.

A digest taken of the stream proves nothing about the file renamed into place when another
process (a prefetch that outlived its stop, a second agent, anything of the node's) writes to
the same file meanwhile. So the agent claims the `.part` first: it opens it without following
a link, takes an exclusive `flock` (a second agent is refused), and looks through /proc for
any other process holding that inode open; one that does gets the old inode to itself (the
`.part` is unlinked and made afresh with O_EXCL, its bytes not trusted). Every write then goes
through the one descriptor, and before the rename the file itself is re-checked: its size is
the bytes written, its digest is read back from disk, and the path still names the inode
written.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import IO

from mvp_tui.node.hub import DownloadError
from mvp_tui.node.settings import DOWNLOAD_CHUNK

PART_MODE = 0o600


def other_openers(fd: int) -> list[int]:
    """The pids, other than ours, with an open descriptor on the file `fd` is open on."""
    mine = os.fstat(fd)
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    return [pid for pid in pids if pid != os.getpid() and holds((mine.st_dev, mine.st_ino), pid)]


def holds(file_id: tuple[int, int], pid: int) -> bool:
    """Whether process `pid` has the file (st_dev, st_ino) open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to read
        return False
    for name in fds:
        try:
            seen = os.stat(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if (seen.st_dev, seen.st_ino) == file_id:
            return True
    return False


class PartFile:
    """One claimed `.part`: `handle` is the only way its bytes are written or read back."""

    def __init__(self, path: Path, handle: IO[bytes], distrusted: list[int]) -> None:
        self.path = path
        self.handle = handle
        # Pids that still had the previous `.part` open: its bytes were left to them.
        self.distrusted = distrusted

    @classmethod
    def claim(cls, path: Path) -> PartFile:
        """The `.part` at `path`, ours alone (see the module's docstring)."""
        fd = _open(path)
        distrusted = other_openers(fd)
        if distrusted:  # a writer we did not stop: it keeps the old inode, we start afresh
            os.close(fd)
            path.unlink()
            fd = _open(path)
        return cls(path, os.fdopen(fd, "r+b"), distrusted)

    def size(self) -> int:
        self.handle.flush()
        return os.fstat(self.handle.fileno()).st_size

    def start_at(self, offset: int) -> None:
        """The next write goes at `offset`; anything after it is dropped."""
        self.handle.flush()
        self.handle.truncate(offset)
        self.handle.seek(offset)

    def write(self, data: bytes) -> None:
        self.handle.write(data)

    def head(self, count: int) -> bytes:
        self.handle.flush()
        return os.pread(self.handle.fileno(), count, 0)

    def sha256(self) -> str:
        """The digest of the file's bytes on disk, read back through our descriptor."""
        self.handle.flush()
        digest = hashlib.sha256()
        fd, offset = self.handle.fileno(), 0
        while True:
            block = os.pread(fd, DOWNLOAD_CHUNK * 8, offset)
            if not block:
                return digest.hexdigest()
            digest.update(block)
            offset += len(block)

    def rename_to(self, dest: Path) -> None:
        """`os.replace` onto `dest`, once the path still names the inode we wrote."""
        self.handle.flush()
        mine = os.fstat(self.handle.fileno())
        try:
            named = os.lstat(self.path)
        except OSError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
            raise DownloadError(f"{self.path} was replaced by another file while downloading")
        os.replace(str(self.path), str(dest))

    def discard(self) -> None:
        """Drop the file (a wrong download): unlinked if the path is still ours."""
        mine = os.fstat(self.handle.fileno())
        try:
            named = os.lstat(self.path)
        except OSError:
            return
        if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
            self.path.unlink()

    def close(self) -> None:
        self.handle.close()  # the lock goes with the descriptor


def _open(path: Path) -> int:
    """`path` opened for update, never through a link, created with O_EXCL when missing,
    and locked; a DownloadError when another agent holds it."""
    import fcntl

    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(str(path), flags)
    except FileNotFoundError:
        fd = os.open(str(path), flags | os.O_CREAT | os.O_EXCL, PART_MODE)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        path.unlink()  # a link where the .part goes: never written through
        fd = os.open(str(path), flags | os.O_CREAT | os.O_EXCL, PART_MODE)
    try:
        if not _regular(fd):
            raise DownloadError(f"{path} is not a regular file")  # this host's cache
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DownloadError(
                f"another process holds {path} (a second agent downloading the same model?)"
            ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
