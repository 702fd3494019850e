"""Why a run, or one attempt of it, failed: errors a user can act on, each with its fix.

An attempt is one offer taken from create to a serving engine. When it fails, the failure
says whether another host could do better (`FailureScope.HOST`: SSH never answered, the
instance exited, the download crawled, the engine died on load) or whether every host would
fail the same way (`FailureScope.RUN`: the image lacks python3, the model is corrupt, the
config is wrong). The run controller destroys a failed host and walks on; a run-wide failure
stops the run at once, with the fix named.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mvp_tui.errors import UserError
from mvp_tui.ssh.errors import (
    AgentFileError,
    AuthFailed,
    BootstrapTimedOut,
    HostKeyChanged,
    IdentityError,
    ImageUnfit,
    LocalSshProblem,
    PinnedKeyNotServed,
    SshError,
)


class RunFailed(UserError):
    """The run cannot go on; the message says why, the fix what to do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message, fix=fix)


class NodeStoppedItself(RunFailed):
    """The node's idle stop fired: nobody used its model for the window, so it destroys its
    own lease. The run's plan is done (not a host failure to walk past)."""


class FailureScope(enum.Enum):
    HOST = "host"  # this host failed: destroy it and try the next offer
    RUN = "run"  # every host would fail the same way: stop the run


class Stage(enum.Enum):
    """How far an attempt got, in order (the journal and the Leases pane name them)."""

    CREATE = "create"
    RUNNING = "running"
    SSH = "ssh"
    AGENT = "agent"
    MODEL = "model"
    ENGINE = "engine"
    SERVING = "serving"


# The node agent's phases, as the stage they belong to.
AGENT_PHASE_STAGES = {
    "config": Stage.AGENT,
    "probe": Stage.AGENT,
    "watchdog": Stage.AGENT,
    "model": Stage.MODEL,
    "engine_start": Stage.ENGINE,
    "engine_health": Stage.ENGINE,
    "watch": Stage.SERVING,
}


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One attempt's end before (or after) it served: where, why, and what kind of failure.
    `kind` is short and stable ("ssh_unreachable", "instance_exited", …): the same kind on
    several hosts in a row means it is not the hosts."""

    stage: Stage
    scope: FailureScope
    kind: str
    reason: str
    fix: str = ""

    @property
    def host(self) -> bool:
        return self.scope is FailureScope.HOST


class AttemptFailed(RunFailed):
    """An attempt failed; `failure` says where and whether the walk may go on."""

    def __init__(self, failure: AttemptFailure) -> None:
        super().__init__(failure.reason, failure.fix)
        self.failure = failure


def ssh_failure(error: SshError, stage: Stage) -> AttemptFailure:
    """An SSH step's failure, classified: our own key, files or SSH client are run-wide (no
    other host would do better), as is an image without python3; a host that never
    answers, refuses the key or changes its host key is that host's."""
    host, run = FailureScope.HOST, FailureScope.RUN
    scope, kind = host, "ssh_failed"
    if isinstance(error, ImageUnfit):
        scope, kind = run, "image_unfit"
    elif isinstance(error, IdentityError | AgentFileError):
        scope, kind = run, "local_ssh"
    elif isinstance(error, LocalSshProblem):  # a live sshd, our client failing (seed 003)
        scope, kind = run, "local_ssh_client"
    elif isinstance(error, AuthFailed):
        kind = "ssh_key_refused"
    elif isinstance(error, HostKeyChanged):
        kind = "host_key_changed"
    elif isinstance(error, PinnedKeyNotServed):
        kind = "host_key_not_pinned"
    elif isinstance(error, BootstrapTimedOut):
        kind = "ssh_unreachable" if stage is Stage.SSH else "not_ready"
    return AttemptFailure(stage, scope, kind, error.message, error.fix)


class RepeatGuard:
    """The same host failure on `limit` hosts in a row: it is not the hosts, stop the run."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._kind = ""
        self._count = 0

    def note(self, failure: AttemptFailure) -> bool:
        """Count one more failed host; True when the limit is reached."""
        if failure.kind == self._kind:
            self._count += 1
        else:
            self._kind, self._count = failure.kind, 1
        return self._count >= self.limit

    @property
    def count(self) -> int:
        return self._count


def boot_budget_s(cap_s: float, image_gb: float, down_mbps: float, base_s: float = 90.0) -> float:
    """How long an instance may take from running to an answering sshd: a base for the boot
    and sshd, plus twice the image's pull time at the offer's download bandwidth (where the
    provider reports one); never more than `cap_s` ([ssh] ready_timeout_secs)."""
    pull_s = image_gb * 8000.0 / down_mbps if image_gb > 0 and down_mbps > 0 else 0.0
    return min(cap_s, base_s + 2.0 * pull_s)
