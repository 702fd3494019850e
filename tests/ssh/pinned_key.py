"""The part of a Vast instance's start command that installs the host key pinned before
create, as the test harness plays it for a fake instance whose node is a test sshd: the
sshd at the instance's SSH port adopts the key (file replaced, SIGHUP). The real onstart
lines are run against a real sshd in tests/vastai/test_pinned_host_key.py."""

from __future__ import annotations

import base64

from mvp_tui.providers.vastai.host_key import PIECE_PREFIX
from tests.ssh.sshd import RUNNING


def pinned_key(env: dict[str, str]) -> bytes | None:
    """The private host key a create's env carries in pieces, or None."""
    pieces, n = [], 1
    while f"{PIECE_PREFIX}{n}" in env:
        pieces.append(env[f"{PIECE_PREFIX}{n}"])
        n += 1
    return base64.b64decode("".join(pieces)) if pieces else None


def install_pinned_host_key(
    instance_id: int, endpoint: tuple[str, int, bool] | None, env: dict[str, str]
) -> None:
    key = pinned_key(env)
    sshd = RUNNING.get(endpoint[1]) if endpoint is not None else None
    if key is not None and sshd is not None:
        sshd.adopt_host_key(key)
