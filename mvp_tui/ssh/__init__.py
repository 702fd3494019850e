"""Reaching a leased node over SSH: identity, pinned host keys, retries, the agent, forwards.

`NodeSession` is the one entry point the run engine uses; the rest is its parts.
"""

from __future__ import annotations

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
