"""Rotating a Vast node's host key over the first verified session.

The key pinned before create reached the node in the create's `env`, which Vast keeps
readable (`extra_env`, the console, the instance's own key) for the instance's life: with a
network position on the SSH path it buys a man in the middle of every later connection
(reconnects, re-attach). So once it has answered, the node makes a new key itself (the
private half never travels), the engine records it as pending, the node puts it in place and
reloads sshd, and a fresh connection must show it before it is pinned. A crash in between
leaves both keys in the record: whichever the node shows is accepted once, then only that one.
A rotation that cannot be made keeps the pinned key and says why; it never fails the run.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncssh

from mvp_tui.providers.vastai.host_key import (
    ROTATE_MAKE,
    ROTATE_SWAP,
    SSH_DIR_DEFAULT,
    SSHD_PIDFILE_DEFAULT,
)
from mvp_tui.ssh.hostkeys import HostKeyPins, fingerprint_of
from mvp_tui.untrusted import one_line_ascii

# sshd re-execs on SIGHUP: connections in that instant are refused, so the check retries.
CONFIRM_WITHIN_S = 5.0
CONFIRM_PACE_S = 0.1


@dataclass(frozen=True, slots=True)
class RotationPlace:
    """Where the node's sshd keeps its ed25519 host key and its pid (the onstart's own
    defaults; a test points both at a loopback sshd)."""

    ssh_dir: str = SSH_DIR_DEFAULT
    sshd_pidfile: str = SSHD_PIDFILE_DEFAULT


@dataclass(frozen=True, slots=True)
class Rotated:
    """How a rotation ended: `new` is the key pinned now (None: the old one stays)."""

    new: str | None
    detail: str


# Opens a fresh connection through the session's own path (pins, identity, proxies) and
# returns the key it was accepted with, or None when none was.
Confirm = Callable[[], Awaitable[str | None]]


async def rotate_host_key(
    conn: asyncssh.SSHClientConnection,
    place: RotationPlace,
    pins: HostKeyPins,
    lease_key: str,
    confirm: Confirm,
    *,
    run_timeout_s: float,
) -> Rotated:
    """Make, pend, swap, confirm; see the module's docstring."""
    verified = pins.get(lease_key)
    if verified is None:
        return Rotated(None, "host key not rotated: no key is pinned for this lease")
    served = " ".join(verified.split()[:2])
    made = await _run(conn, ROTATE_MAKE, [place.ssh_dir, served], run_timeout_s)
    if isinstance(made, str):
        return Rotated(None, f"host key not rotated: {made}")
    new = _public_line(made.stdout)
    if new is None:
        return Rotated(None, "host key not rotated: ssh-keygen printed no ed25519 key")
    pins.propose(lease_key, new)
    swapped = await _run(
        conn, ROTATE_SWAP, [place.ssh_dir, served, place.sshd_pidfile], run_timeout_s
    )
    if isinstance(swapped, str):
        # The swap may have happened before the error: the pending key stays known, so a
        # later connection that shows it is still accepted.
        return Rotated(None, f"host key rotation not confirmed: {swapped}; both keys are "
                             "kept until one of them answers")
    if not await _confirmed(confirm, new):
        return Rotated(None, "host key rotation not confirmed: no connection showed the new "
                             "key; both are kept until one of them answers")
    return Rotated(new, f"host key rotated to {fingerprint_of(new)} (made on the node)")


async def _run(
    conn: asyncssh.SSHClientConnection, script: str, args: list[str], timeout_s: float
) -> asyncssh.SSHCompletedProcess | str:
    """The script's completed run, or one line saying why it failed."""
    command = shlex.join(["sh", "-c", script, "sh", *args])
    try:
        done = await conn.run(command, check=False, timeout=timeout_s)
    except (OSError, asyncssh.Error, TimeoutError) as error:
        return one_line_ascii(str(error) or type(error).__name__, 200)
    if done.exit_status != 0:
        err = done.stderr if isinstance(done.stderr, str) else ""
        return one_line_ascii(err.strip() or f"exit status {done.exit_status}", 200)
    return done


def _public_line(out: object) -> str | None:
    text = out if isinstance(out, str) else ""
    fields = text.split()
    if len(fields) < 2 or fields[0] != "ssh-ed25519":
        return None
    line = f"{fields[0]} {fields[1]}"
    try:
        asyncssh.import_public_key(line)
    except (asyncssh.KeyImportError, ValueError):
        return None
    return line


async def _confirmed(confirm: Confirm, new: str) -> bool:
    """Whether a fresh connection shows the new key within the re-exec's window (one that
    still shows the old key may have reached sshd before it reloaded: tried again)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + CONFIRM_WITHIN_S
    while True:
        seen = await confirm()
        if seen is not None and _same(seen, new):
            return True
        if loop.time() >= until:
            return False
        await asyncio.sleep(CONFIRM_PACE_S)  # the pace of retries while sshd re-execs


def _same(a: str, b: str) -> bool:
    return a.split()[:2] == b.split()[:2]
