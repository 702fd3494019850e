"""Events of the run as a whole (the lease, SSH, datastream and prompt parts have their own)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mvp_tui.events import EngineEvent


class RunState(enum.Enum):
    """Where the run is; `RunStateChanged` carries its value."""

    IDLE = "idle"
    LEASING = "leasing"
    BRINGING_UP = "bringing up"
    SERVING = "serving"
    TEARING_DOWN = "tearing down"
    ENDED = "ended"


# A lease is being made, brought up or torn down: the controller's `busy`, a UI's status.
BUSY_STATES = frozenset({RunState.LEASING, RunState.BRINGING_UP, RunState.TEARING_DOWN})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(EngineEvent):
    run_id: str
    provider: str
    profile: str
    state_dir: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OffersListed(EngineEvent):
    provider: str
    count: int
    skipped: int = 0  # rows the provider sent that could not be read


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountKeyReady(EngineEvent):
    """The provider's account holds the run's SSH public key (found, or registered now and
    listed again to check); `line` is the seed's wording of it."""

    run_id: str
    provider: str
    identity: str  # the private key's path
    fingerprint: str  # SHA256:…
    registered_now: bool
    line: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeReady(EngineEvent):
    """The engine on the node answers: prompts can go to `local_url` from this machine."""

    run_id: str
    model_id: str
    engine: str
    local_url: str  # OpenAI-compatible base URL reachable here (direct or via SSH forward)
    load_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFailed(EngineEvent):
    run_id: str
    reason: str
    fix: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeWatchdog(EngineEvent):
    """What the node's switch said (engine/watchdog.py reads it from the agent): `ready`
    (armed) or `failed` (with the reason) at start, `fired` when it began destroying its
    lease, `destroyed` / `ended` once done."""

    run_id: str
    status: str  # "ready" | "failed" | "fired" | "destroyed" | "ended"
    reason: str = ""
    deadline_at: float | None = None
    idle_teardown_mins: float | None = None
    armed: bool = False
    trigger: str = ""  # "deadline" | "idle" once fired
    # A failed verdict's scope: "host" where only this host failed (it cannot reach the
    # provider's API), "run" where every host would fail the same (the key lacks the right).
    scope: str = "run"
    # Whether the key's write right was proven (Vast's no-op change); False: read only
    # (RunPod), None: not said (an older agent, or not a ready verdict).
    destroy_proven: bool | None = None
    bills: bool = False  # a fired switch that gave up: its instance may still bill


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeBootGuard(EngineEvent):
    """What the boot guard said, as the agent read it (engine/boot_guard.py): `armed` (stood
    down now that the agent runs), `off`, `none` (no guard ran), `not_needed` (local/Docker),
    or `failed` (why)."""

    run_id: str
    status: str
    reason: str = ""
    grace_s: int | None = None
    tool: str = ""  # "python3" | "curl": what the guard would have destroyed with


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitReached(EngineEvent):
    """A `[limits]` cap was reached (engine/limits.py): the run tears its lease down."""

    run_id: str
    provider_id: str
    limit: str  # "max_spend_usd" | "max_hours"
    value: float
    reached: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(EngineEvent):
    """The last event of a run; `exit_code` is what `mvp-tui up` exits with."""

    run_id: str
    exit_code: int
    reason: str = ""
    leases_left: tuple[str, ...] = ()  # provider ids that may still bill


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStateChanged(EngineEvent):
    """The run controller moved on: idle, leasing, bringing up, serving, tearing down, ended."""

    run_id: str
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptAbandoned(EngineEvent):
    """An attempt's node failed (before serving, or lost while serving): it is destroyed and,
    for a host failure, the walk goes on with the next offer."""

    run_id: str
    provider_id: str
    offer_id: str
    stage: str  # how far it got: create, running, ssh, agent, model, engine, serving
    scope: str  # "host": the next offer is tried; "run": the run stops
    failure_kind: str  # short and stable: ssh_unreachable, instance_exited, node_model, ...
    reason: str
    fix: str = ""
    stage_secs: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StageBudget(EngineEvent):
    """How long a stage of the current attempt may take before the host is given up."""

    run_id: str
    stage: str
    budget_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadySummary(EngineEvent):
    """The node serves: the winning attempt's seconds per stage (words as the user knows the
    work: image, ssh, agent, model, load), and what the run spent before the first token."""

    run_id: str
    seconds: float  # from the walk's first create to ready
    stages: tuple[tuple[str, float], ...]
    spent_usd: float
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkOrderSaid(EngineEvent):
    """The offers the walk will try, in order (after auto picks and re-sorts)."""

    run_id: str
    offers: tuple[str, ...]  # "provider:offer id", first to be tried first
    reason: str = ""  # why this order ("" : as picked)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeReplacing(EngineEvent):
    """The serving node was lost: it is destroyed and the next offer brought up; the prompt
    RPC and the local OpenAI port keep their addresses."""

    run_id: str
    provider_id: str
    reason: str
    replacement: int  # 1 for the first replacement of this run


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointReady(EngineEvent):
    """The run's OpenAI endpoint for other tools: `base_url` (no /v1) on this machine, its
    model, whether the node checks the run's key (`auth` "key" | "none"), and the port asked
    for when it was taken and another was picked (0: it was free)."""

    run_id: str
    base_url: str
    model: str
    auth: str
    idle_stop_mins: float | None = None
    port_taken: int = 0
    port_owner: str = ""  # who held it then (`port_owner`), when that could be read
    slots: int = 0  # requests the engine serves at once (1: one at a time); 0: unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleStopNotice(EngineEvent):
    """The node's idle stop: `armed` (serving; the window counts from no request),
    `warning` (it stops in `stops_in_s` unless a request comes), `postponed` (one came)."""

    run_id: str
    state: str  # "armed" | "warning" | "postponed"
    idle_stop_mins: float | None = None
    stops_in_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionChanged(EngineEvent):
    """The run session's provider of the moment (its first, or the next one walked) and what
    a UI needs of it: whether leasing there bills or goes over SSH, and the run's `[limits]`
    as that provider's engine reads them (`Limits`'s fields by name: this module stays
    below the limits'). `closed`: the session takes no new lease (its final stop began)."""

    run_id: str
    provider: str
    billing: bool
    ssh: bool
    limits: dict[str, float | None]
    closed: bool = False
