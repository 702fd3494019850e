"""Reaching a leased node over SSH: identity, pinned host keys, retries, the agent, forwards.

`NodeSession` is the one entry point the run engine uses; the rest is its parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvp_tui.lazy_names import lazy_names

if TYPE_CHECKING:
    from mvp_tui.ssh.errors import (
        AgentFileError,
        AuthFailed,
        BootstrapTimedOut,
        HostKeyChanged,
        IdentityError,
        ImageUnfit,
        LocalSshProblem,
        SshError,
    )
    from mvp_tui.ssh.events import (
        AgentExited,
        AgentStarted,
        AgentStop,
        AttemptOutcome,
        BootstrapReady,
        HostKeyPinned,
        Phase,
        PortForwarded,
        SessionClosed,
        SessionStopped,
        SshAttempt,
        StopReason,
    )
    from mvp_tui.ssh.hostkeys import FilePins, HostKeyPins, MemoryPins
    from mvp_tui.ssh.identity import SshIdentity, load_identity
    from mvp_tui.ssh.logtail import LogPositions, NodeLineCallback
    from mvp_tui.ssh.session import NodeSession, ProviderLineCallback
    from mvp_tui.ssh.settings import SshSettings

# Names load on first use: importing one light part (errors, events) must not load asyncssh.
_HOMES = {
    "AgentFileError": "mvp_tui.ssh.errors",
    "AuthFailed": "mvp_tui.ssh.errors",
    "BootstrapTimedOut": "mvp_tui.ssh.errors",
    "HostKeyChanged": "mvp_tui.ssh.errors",
    "IdentityError": "mvp_tui.ssh.errors",
    "ImageUnfit": "mvp_tui.ssh.errors",
    "LocalSshProblem": "mvp_tui.ssh.errors",
    "SshError": "mvp_tui.ssh.errors",
    "AgentExited": "mvp_tui.ssh.events",
    "AgentStarted": "mvp_tui.ssh.events",
    "AgentStop": "mvp_tui.ssh.events",
    "AttemptOutcome": "mvp_tui.ssh.events",
    "BootstrapReady": "mvp_tui.ssh.events",
    "HostKeyPinned": "mvp_tui.ssh.events",
    "Phase": "mvp_tui.ssh.events",
    "PortForwarded": "mvp_tui.ssh.events",
    "SessionClosed": "mvp_tui.ssh.events",
    "SessionStopped": "mvp_tui.ssh.events",
    "SshAttempt": "mvp_tui.ssh.events",
    "StopReason": "mvp_tui.ssh.events",
    "FilePins": "mvp_tui.ssh.hostkeys",
    "HostKeyPins": "mvp_tui.ssh.hostkeys",
    "MemoryPins": "mvp_tui.ssh.hostkeys",
    "SshIdentity": "mvp_tui.ssh.identity",
    "load_identity": "mvp_tui.ssh.identity",
    "LogPositions": "mvp_tui.ssh.logtail",
    "NodeLineCallback": "mvp_tui.ssh.logtail",
    "NodeSession": "mvp_tui.ssh.session",
    "ProviderLineCallback": "mvp_tui.ssh.session",
    "SshSettings": "mvp_tui.ssh.settings",
}

__all__ = [
    "AgentExited",
    "AgentFileError",
    "AgentStarted",
    "AgentStop",
    "AttemptOutcome",
    "AuthFailed",
    "BootstrapReady",
    "BootstrapTimedOut",
    "FilePins",
    "HostKeyChanged",
    "HostKeyPinned",
    "HostKeyPins",
    "IdentityError",
    "ImageUnfit",
    "LocalSshProblem",
    "LogPositions",
    "MemoryPins",
    "NodeLineCallback",
    "NodeSession",
    "Phase",
    "PortForwarded",
    "ProviderLineCallback",
    "SessionClosed",
    "SessionStopped",
    "SshAttempt",
    "SshError",
    "SshIdentity",
    "SshSettings",
    "StopReason",
    "load_identity",
]


__getattr__ = lazy_names(__name__, _HOMES)
