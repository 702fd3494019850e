"""Why SSH work on a node stopped, as errors a user can act on.

Each error says what failed, with which input, and the fix; none ever holds a private key,
a passphrase or an env value. `fix` is kept apart so the dashboard can show it on its own line.
"""

from __future__ import annotations

from mvp_tui.errors import UserError


class SshError(UserError):
    """An SSH step failed in a way the user must see."""


class IdentityError(SshError):
    """The SSH identity (private key or agent key) cannot be used."""


class HostKeyChanged(SshError):
    """The node presented a host key other than the one pinned for its lease."""

    def __init__(self, lease_key: str, pinned: str, seen: str) -> None:
        super().__init__(
            f"host key of lease {lease_key} changed: pinned {pinned}, node presented {seen}; "
            "refusing to connect",
            fix="if the node was legitimately rebuilt, destroy this lease and start a new one; "
            "otherwise someone may be intercepting the connection",
        )
        self.lease_key = lease_key
        self.pinned = pinned
        self.seen = seen


class AuthFailed(SshError):
    """The node refused our user/key (bounded retries exhausted)."""


class LocalSshProblem(SshError):
    """The node's sshd answers, but our side fails the handshake again and again."""


class ImageUnfit(SshError):
    """The node's image lacks what the agent needs to start (python3): retrying cannot help."""


class BootstrapTimedOut(SshError):
    """The node was not ready (or not reachable again) within the configured time."""


class PinnedKeyNotServed(BootstrapTimedOut):
    """The node answered, but never with the host key pinned for it before create."""


PINNED_KEY_FIX = (
    "an image or launch mode whose sshd starts without the instance's onstart cannot be "
    "pinned: pick another image, or set [vastai] pin_host_key = false to trust the first key "
    "(its fingerprint is shown)"
)


class AgentFileError(SshError):
    """The node agent to upload, or its env, is unusable."""
