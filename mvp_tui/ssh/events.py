"""Events of a node's SSH session, posted to the engine's sink (see mvp_tui.events)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mvp_tui.events import EngineEvent


class AttemptOutcome(enum.Enum):
    """How one SSH attempt went."""

    CONNECTED = "connected"  # logged in with the pinned (or newly pinned) host key
    NOT_LISTENING = "not_listening"  # refused / unreachable: sshd not up yet
    TIMED_OUT = "timed_out"  # no answer within connect_timeout: a slow node
    DROPPED = "dropped"  # the node or the network ended the connection
    AUTH_FAILED = "auth_failed"  # user/key refused
    HOST_KEY_CHANGED = "host_key_changed"  # refused: not the pinned host key
    HOST_KEY_NOT_YET = "host_key_not_yet"  # refused: the pinned key is not installed yet
    LOCAL_FAILURE = "local_failure"  # our side failed the handshake
    COMMAND_FAILED = "command_failed"  # upload or the node-side reader failed
    AGENT_EXITED = "agent_exited"  # the node agent ended before ready
    IMAGE_UNFIT = "image_unfit"  # the node's image lacks what the agent needs (python3)


class Phase(enum.Enum):
    """Before ready, failures count against ready_timeout; after, against reconnect_timeout."""

    BOOTSTRAP = "bootstrap"
    SERVING = "serving"


class StopReason(enum.Enum):
    """Why the session's retry loop ended."""

    CLOSED = "closed"  # the caller closed the session (node stop / teardown)
    AGENT_EXITED = "agent_exited"  # the agent ended after it was ready
    HOST_KEY_CHANGED = "host_key_changed"
    AUTH_FAILED = "auth_failed"
    LOCAL_PROBLEM = "local_problem"
    IMAGE_UNFIT = "image_unfit"
    TIMED_OUT = "timed_out"
    INTERNAL_ERROR = "internal_error"  # a bug ended the loop; `failure` says which


class AgentStop(enum.Enum):
    """How the node agent was stopped at teardown."""

    SHUTDOWN = "shutdown"  # it exited after `shutdown` on its control fifo
    TERMINATED = "terminated"  # it needed SIGTERM
    KILLED = "killed"  # it needed SIGKILL
    NOT_RUNNING = "not_running"  # it had already exited
    UNREACHABLE = "unreachable"  # the node could not be reached: destroying the lease stops it
    NOT_STARTED = "not_started"  # no agent was ever launched
    LEFT_RUNNING = "left_running"  # close(shutdown_agent=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SshAttempt(EngineEvent):
    """One SSH attempt to a lease's node, and what came of it.

    An attempt that logs in reports twice: CONNECTED, then how its connection ended (with
    the next try), so the dashboard shows a live connection as such.
    """

    lease_key: str
    attempt: int
    target: str  # host:port
    outcome: AttemptOutcome
    detail: str = ""  # one line of printable ASCII
    next_try_s: float | None = None  # None: no further try (connected, or the loop stops)
    phase: Phase = Phase.BOOTSTRAP


@dataclass(frozen=True, slots=True, kw_only=True)
class HostKeyPinned(EngineEvent):
    """The lease's node host key was seen first and pinned; or, `before_create`, the key
    pinned before the instance existed was presented by it (verified)."""

    lease_key: str
    fingerprint: str
    before_create: bool = False
    rotated_from: str = ""  # a rotation's new key replaced the pin with this fingerprint


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStarted(EngineEvent):
    """The node agent runs detached on the node."""

    lease_key: str
    pid: int
    remote_dir: str
    resumed: bool = False  # followed an agent already running (re-attach), not launched


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentExited(EngineEvent):
    """The node agent ended on its own (exit_code None when it could not be read)."""

    lease_key: str
    exit_code: int | None
    before_ready: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapReady(EngineEvent):
    """The caller signalled ready: retries now only keep the connection up."""

    lease_key: str
    attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PortForwarded(EngineEvent):
    """127.0.0.1:local_port carries to the node's 127.0.0.1:remote_port (again on reconnect)."""

    lease_key: str
    local_port: int
    remote_port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStopped(EngineEvent):
    """The retry loop ended; `detail` is the error shown to the user, if any."""

    lease_key: str
    reason: StopReason
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionClosed(EngineEvent):
    """Teardown finished on the SSH side: the caller destroys the lease next."""

    lease_key: str
    agent: AgentStop
