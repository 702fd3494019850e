"""The start command's prefetch: read its state line, stop it, adopt its file."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from mvp_tui.node.part_file import holds
from mvp_tui.node_protocol import PREFETCH_STATE_SUFFIX

PREFETCH_STOP_S = 5.0  # a stopped prefetch is gone within this (curl and python3 die at once)


class Prefetch:
    """The start command's fetch as its state line left it (providers/prefetch.py)."""

    def __init__(self, pid: int, started_at: float, tool: str) -> None:
        self.pid, self.started_at, self.tool = pid, started_at, tool


def read_prefetch(dest: Path) -> Prefetch | None:
    """The state line beside `dest`, if a prefetch ran; the node wrote it, so it is parsed
    strictly and anything odd reads as none."""
    try:
        text = dest.with_name(dest.name + PREFETCH_STATE_SUFFIX).read_text()[:200]
    except (OSError, UnicodeDecodeError):
        return None
    match = re.fullmatch(r"(\d{1,9}) (\d{1,12}) (curl|python3)\s*", text)
    if not match:
        return None
    return Prefetch(int(match.group(1)), float(match.group(2)), match.group(3))


def _fetching(pid: int, part: Path) -> bool:
    """Whether `pid` is a live process fetching into `part` (a reused pid is not): it has
    that file open (same inode), or one of its arguments is that file (compared as a file,
    or before the file exists as a resolved path, so `cache//x/../x/m.gguf.part` matches),
    not the argv's text."""
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat_text[stat_text.rindex(")") + 2 :].startswith("Z"):
        return False
    if _holds_open(pid, part):
        return True
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")  # where its relative arguments point
    except OSError:
        cwd = "/"
    return any(_same_file(os.path.join(cwd, os.fsdecode(arg)), part) for arg in argv if arg)


def _holds_open(pid: int, part: Path) -> bool:
    try:
        found = os.stat(part)
    except OSError:
        return False
    return holds((found.st_dev, found.st_ino), pid)


def _same_file(path: str, part: Path) -> bool:
    try:
        return os.path.samefile(path, part)
    except OSError:  # one of them not there (yet): the same place once resolved
        return os.path.normpath(path) == os.path.normpath(os.path.abspath(str(part)))


def stop_prefetch(prefetch: Prefetch, part: Path, wait_s: float = PREFETCH_STOP_S) -> bool:
    """Stop the prefetch so the agent's own downloader owns `part` from here on; whether it
    was still running. Bounded: SIGTERM, a short poll, then SIGKILL."""
    if not _fetching(prefetch.pid, part):
        return False
    deadline = time.monotonic() + wait_s
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.kill(prefetch.pid, sig)
        while _fetching(prefetch.pid, part) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls another process's exit: nothing to wait on but /proc
        if not _fetching(prefetch.pid, part):
            return True
        deadline = time.monotonic() + wait_s
    return True


