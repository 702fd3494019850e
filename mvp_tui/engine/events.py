"""Events of the run as a whole (the lease, SSH, datastream and prompt parts have their own)."""

from __future__ import annotations

from dataclasses import dataclass

from mvp_tui.events import EngineEvent


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
