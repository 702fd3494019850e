"""Process-table checks for tests: is a pid alive, and wait (event-driven) until it is not."""

from __future__ import annotations

import asyncio
import contextlib
import os


def alive(pid: int) -> bool:
    """True while `pid` is a running process (a zombie counts as gone: it cannot run)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat[stat.rfind(b")") + 2 :].split()[0]
    return state not in (b"Z", b"X")


async def wait_gone(pid: int, within: float) -> None:
    """Wait until `pid` has exited, woken by its pidfd (works for non-children too)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    exited = asyncio.Event()
    loop.add_reader(fd, exited.set)
    try:
        await asyncio.wait_for(exited.wait(), within)
    finally:
        loop.remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
