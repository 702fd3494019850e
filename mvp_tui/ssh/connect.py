"""One SSH connection to a lease's node: pinned host key, our identity; from the user's
OpenSSH config only how to reach the host (a jump host, a proxy: `user_config`).

A failed connect becomes a `ConnectFailed` carrying an `AttemptOutcome`, so the retry loop
decides from a named kind, never from message text.
"""

from __future__ import annotations

import asyncio
import errno
import socket

import asyncssh

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.ssh.errors import HostKeyChanged
from mvp_tui.ssh.events import AttemptOutcome
from mvp_tui.ssh.hostkeys import HostKeyPins, PinCheck, PinningClient
from mvp_tui.ssh.identity import SshIdentity
from mvp_tui.ssh.settings import SshSettings
from mvp_tui.ssh.user_config import config_paths
from mvp_tui.untrusted import one_line_ascii

_DESCRIBE_CHARS = 4096
_UNREACHABLE = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


class ConnectFailed(Exception):
    """A connect attempt failed; `outcome` says how, `detail` is one line of printable ASCII."""

    def __init__(
        self, outcome: AttemptOutcome, detail: str, *, host_key: HostKeyChanged | None = None
    ) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail
        self.host_key = host_key


async def open_connection(
    endpoint: SshEndpoint,
    identity: SshIdentity,
    pins: HostKeyPins,
    lease_key: str,
    settings: SshSettings,
    *,
    awaiting_pin: bool = False,
) -> tuple[asyncssh.SSHClientConnection, PinCheck]:
    """Connect and log in, or raise `ConnectFailed`. The check tells whether a key was pinned.
    `awaiting_pin`: the lease's key was pinned before create and not yet seen (another key is
    "not yet", not a change)."""
    check = PinCheck(lease_key=lease_key, awaiting=awaiting_pin)
    try:
        async with asyncio.timeout(settings.connect_timeout):
            async with identity.client_keys() as keys:
                conn = await asyncssh.connect(
                    endpoint.host,
                    endpoint.port,
                    username=endpoint.user,
                    client_factory=lambda: PinningClient(pins, check),
                    known_hosts=([], [], []),
                    server_host_key_algs="default",
                    client_keys=keys,
                    agent_path=None,
                    agent_forwarding=False,
                    config=config_paths(settings.config_file),
                    request_pty=False,  # the agent's channels carry bytes, never a terminal
                    preferred_auth="publickey",
                    gss_host=None,
                    ignore_encrypted=True,
                    keepalive_interval=settings.keepalive_interval,
                    keepalive_count_max=settings.keepalive_count_max,
                    connect_timeout=settings.connect_timeout,
                    login_timeout=settings.connect_timeout,
                )
    except Exception as error:
        raise classify(error, check) from error
    return conn, check


def classify(error: BaseException, check: PinCheck) -> ConnectFailed:
    """The attempt outcome of a connect failure."""
    if check.mismatch is not None:
        return ConnectFailed(
            AttemptOutcome.HOST_KEY_CHANGED, str(check.mismatch), host_key=check.mismatch
        )
    if check.not_yet is not None:
        return ConnectFailed(AttemptOutcome.HOST_KEY_NOT_YET, check.not_yet)
    outcome = _outcome(error)
    # Cut long only: the session redacts the run's secrets first, then cuts to one line.
    return ConnectFailed(outcome, one_line_ascii(_describe(error, outcome), _DESCRIBE_CHARS))


def _outcome(error: BaseException) -> AttemptOutcome:
    if isinstance(error, asyncssh.PermissionDenied):
        return AttemptOutcome.AUTH_FAILED
    if isinstance(error, TimeoutError):
        return AttemptOutcome.TIMED_OUT
    if isinstance(
        error,
        asyncssh.ConnectionLost
        | ConnectionResetError
        | ConnectionAbortedError
        | BrokenPipeError
        | asyncio.IncompleteReadError,
    ):
        return AttemptOutcome.DROPPED
    if isinstance(error, socket.gaierror):
        return AttemptOutcome.NOT_LISTENING
    if isinstance(error, ConnectionRefusedError) or (
        isinstance(error, OSError) and error.errno in _UNREACHABLE
    ):
        return AttemptOutcome.NOT_LISTENING
    if isinstance(error, OSError):
        # e.g. "Multiple exceptions: ..." when every address of the host refused.
        return AttemptOutcome.NOT_LISTENING
    # Handshake errors raised by our client (no common algorithm, bad packet, an agent
    # that vanished, ...): the banner probe tells whether the node is there at all.
    return AttemptOutcome.LOCAL_FAILURE


def _describe(error: BaseException, outcome: AttemptOutcome) -> str:
    text = str(error) or type(error).__name__
    if outcome is AttemptOutcome.NOT_LISTENING:
        return f"no sshd answering yet ({text})"
    if outcome is AttemptOutcome.TIMED_OUT:
        return "no answer within the connect timeout"
    if outcome is AttemptOutcome.AUTH_FAILED:
        return f"login refused ({text})"
    if outcome is AttemptOutcome.DROPPED:
        return f"connection closed by the node ({text})"
    return f"{type(error).__name__}: {text}"
