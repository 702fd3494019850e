"""The Bootstrap checklist as pure data: the run's stages from lease to a healthy engine.

One source per fact: engine facts (the lease, SSH attempts, host key, agent, a failed walk
or node) come as engine events through `apply`; node facts (the node agent's
`mvp.node.<N>.agent` phases and download progress, `mvp.worker.weights`) as datastream
records through `record`. Of the orchestrator's `mvp.orch.bootstrap` phases (written from
the same events) only the ones no event here tells make rows (config, offers, teardown, the
run's exit); a replay's events are rebuilt from its frames (`tui/replay_events.py`).
The node's dead-man's switch is its own row, from the agent's `watchdog` phase frames only,
so a replay (frames, no engine events) shows it as a live run does. The boot guard's row
(the agent's `boot_guard` phase) shows under it once the agent reported the guard, and the
idle stop's row (the switch's `idle_stop_mins`, then its armed / warning / postponed progress)
under that.
Every status reads without colour: ✓ done, ● in progress, ○ not yet, ✗ failed, plus words.
Record fields come from the node: untrusted, so only typed values are used and every text
is cleaned to one line of ASCII.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from mvp_tui.engine.events import NodeFailed, StageBudget
from mvp_tui.events import EngineEvent
from mvp_tui.lease.events import (
    AttemptStarted,
    LeasePending,
    LeaseRunning,
    PrefetchStarted,
    WalkFailed,
)
from mvp_tui.node_protocol import (
    BOOT_GUARD_PHASE,
    ENGINE_OFFLOAD,
    NODE_AGENT_PHASE,
    NODE_AGENT_PROGRESS,
    RPC_SERVER_READY,
    WATCHDOG_PHASE,
    WEIGHTS_LOADED,
    WORKER_FATAL,
    offload_report,
)
from mvp_tui.ssh.events import AgentExited, AgentStarted, AttemptOutcome, HostKeyPinned, SshAttempt
from mvp_tui.untrusted import clean_line, one_line_ascii
from mvp_tui.widgets.node_switch import armed_text, finite

DETAIL_CHARS = 72
FULL_CHARS = 4000  # a failure's whole text, for the detail view (Enter on the pane)
REASON_CHARS = 400  # a failed switch's reason names its fix: kept whole, wrapped on screen
EXTRA_PHASES_KEPT = 8


class Status(enum.Enum):
    PENDING = "○"
    ACTIVE = "●"
    DONE = "✓"
    FAILED = "✗"
    SKIPPED = "–"  # not a step of this kind of node (no SSH on a local or Docker node)


class StageId(enum.Enum):
    """The fixed stages, in order; the value is the stage's name on screen."""

    LEASE = "lease running"
    SSH = "ssh"
    HOST_KEY = "host key"
    AGENT = "agent started"
    WATCHDOG = "node watchdog"
    MODEL = "model"
    ENGINE = "engine healthy"


@dataclass(slots=True)
class Stage:
    """One checklist row; times are event/record times (Unix seconds)."""

    name: str
    status: Status = Status.PENDING
    detail: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    progress: float | None = None  # 0..1 while a download runs
    compact: str = ""  # a shorter detail for a narrow pane ("" = the detail, cut)
    full: str = ""  # a failure's whole text, uncut ("" = the detail is all there is)
    budget_s: float | None = None  # how long the stage may take before the host is given up

    def start(self, at: float) -> None:
        if self.status is Status.PENDING:
            self.status = Status.ACTIVE
        if self.started_at is None:
            self.started_at = at

    def finish(self, at: float, status: Status, detail: str) -> None:
        if self.started_at is None:
            self.started_at = at
        self.status, self.ended_at, self.detail = status, at, detail
        self.progress, self.compact, self.full = None, "", ""

    def seconds(self, now: float) -> float | None:
        """How long it took, or has been running; None before it starts."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else now
        return max(0.0, end - self.started_at)


@dataclass(slots=True)
class SwitchVerdict:
    """The node's dead-man's switch as its `ready` verdict (and later control lines) left it."""

    deadline_at: float | None  # Unix seconds; None: no deadline
    idle_mins: float | None  # the silence limit; None: none
    armed: bool  # the deadline or the silence switch can fire
    idle_armed: bool  # the silence switch is on (a detached run turns it off)


def _text(value: object, limit: int = DETAIL_CHARS) -> str:
    return one_line_ascii(value, limit) if isinstance(value, str) else ""


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"


class BootstrapModel:
    """The checklist of the current lease; a new lease starts it afresh."""

    def __init__(self, *, tz: tzinfo | None = None) -> None:
        self.tz = tz  # clock times (the switch's deadline) in this zone; None: local time
        self.lease_id: str | None = None
        self.stages: dict[StageId, Stage] = {}
        self.extra: dict[str, Stage] = {}  # orchestrator phases not in the fixed list
        self.switch: SwitchVerdict | None = None  # the switch's `ready` verdict, if any
        # A multi-node run's workers, one row each (node id → row); kept across the run's
        # leases (the main node is leased after its workers), cleared by a new run.
        self.workers: dict[int, Stage] = {}
        self._worker_endpoints: dict[str, int] = {}
        self.run_id: str | None = None
        self.reset()

    def reset(self) -> None:
        self.stages = {sid: Stage(sid.value) for sid in StageId}
        self.extra = {}
        self.switch = None
        self.guard: Stage | None = None  # the boot guard's row, once the agent reported it
        self.idle_stop: Stage | None = None  # the node's idle stop, once its switch has one
        self.idle_stop_mins: float | None = None
        self.offload: Stage | None = None  # the engine's GPU offload, once the agent proved it

    @property
    def failed(self) -> bool:
        return any(s.status is Status.FAILED for s in self.rows())

    def full_text(self) -> str:
        """Every row with its whole text, as the detail view shows it."""
        lines = []
        for row in self.rows():
            text = row.full or row.detail
            lines.append(f"{row.status.value} {row.name}" + (f": {text}" if text else ""))
        return "\n".join(lines)

    @property
    def started(self) -> bool:
        return any(s.status is not Status.PENDING for s in self.rows())

    def rows(self) -> list[Stage]:
        """Rows in lifecycle order: phases before the lease (config, offers), the fixed
        stages, a multi-node run's workers, then the phases after it (teardown, the run's
        exit) in arrival order."""
        before = [s for p, s in self.extra.items() if p in BEFORE_LEASE_PHASES]
        after = [s for p, s in self.extra.items() if p not in BEFORE_LEASE_PHASES]
        before.sort(key=lambda s: BEFORE_LEASE_PHASES.index(s.name))
        fixed = list(self.stages.values())
        at = list(self.stages).index(StageId.WATCHDOG) + 1
        for extra in (self.idle_stop, self.guard):  # under the switch's row: they bound the
            if extra is not None:  # bill together
                fixed.insert(at, extra)
        if self.offload is not None:  # under the engine's row: what its load log says
            fixed.insert(fixed.index(self.stages[StageId.ENGINE]) + 1, self.offload)
        return [*before, *fixed, *self.workers.values(), *after]

    # -- events ---------------------------------------------------------------------------
    def apply(self, event: EngineEvent) -> bool:
        handler = _EVENT_HANDLERS.get(type(event))
        if handler is None:
            return False
        handler(self, event)
        return True

    def _pending(self, e: LeasePending) -> None:
        self._switch_lease(e.provider_id, e.run_id)
        stage = self.stages[StageId.LEASE]
        stage.start(e.at - e.waited_s)
        stage.detail = f"{_text(e.provider_id, 24)} {_text(e.raw_state, 24) or 'pending'}"

    def _running(self, e: LeaseRunning) -> None:
        self._switch_lease(e.provider_id, e.run_id)
        stage = self.stages[StageId.LEASE]
        if e.host:
            detail = f"{_text(e.host, 40)}:{e.port} {_text(e.via, 8)}"
        else:
            detail = f"{_text(e.provider_id, 24)} on this machine (no SSH)"
        stage.started_at = e.at - e.after_s
        stage.finish(e.at, Status.DONE, detail)
        if not e.host:  # the provider started the agent itself: no SSH steps to wait for
            for skipped in (StageId.SSH, StageId.HOST_KEY):
                self.stages[skipped].finish(e.at, Status.SKIPPED, "not over SSH")
            self.stages[StageId.AGENT].finish(e.at, Status.DONE, "started with the lease")

    def _attempt(self, e: AttemptStarted) -> None:
        """A create is asked for: the lease row runs (once per lease, until it answers)."""
        stage = self.stages[StageId.LEASE]
        if stage.status is Status.PENDING:
            stage.start(e.at)

    def _walk_failed(self, e: WalkFailed) -> None:
        stage = self.stages[StageId.LEASE]
        stage.finish(e.at, Status.FAILED, _text(e.reason) or "no lease")
        stage.full = _text(e.reason, FULL_CHARS)

    def _node_failed(self, e: NodeFailed) -> None:
        """The engine gave the node up before it served (a failure after ready is the
        Leases pane's: the row stays as it was)."""
        stage = self.stages[StageId.ENGINE]
        if stage.status is Status.DONE:
            return
        stage.finish(e.at, Status.FAILED, _text(e.reason) or "the node cannot serve")
        stage.full = _text(e.reason + (f" — {e.fix}" if e.fix else ""), FULL_CHARS)

    def _prefetch(self, e: PrefetchStarted) -> None:
        """The start command's fetch began with the instance: the row runs from here, its
        bytes unknown until the agent arrives and reports them (it adopts the file)."""
        self._switch_lease(e.provider_id, e.run_id)
        stage = self.stages[StageId.MODEL]
        if stage.status is Status.PENDING:
            stage.start(e.at)
            stage.detail = "fetching at boot since the instance ran; bytes once the agent reports"
            stage.compact = "fetching at boot"

    def _switch_lease(self, provider_id: str, run_id: str = "") -> None:
        if self.lease_id is not None and provider_id != self.lease_id:
            self.reset()
        if run_id and run_id != self.run_id:
            self.workers, self._worker_endpoints, self.run_id = {}, {}, run_id
        self.lease_id = provider_id

    def _ssh(self, e: SshAttempt) -> None:
        stage = self.stages[StageId.SSH]
        stage.name = f"ssh attempt {e.attempt}"
        target = _text(e.target, 48)
        if e.outcome is AttemptOutcome.CONNECTED:
            stage.finish(e.at, Status.DONE, f"connected {target}")
            return
        stage.start(e.at)
        what = e.outcome.value.replace("_", " ")
        detail = f"{target} {what}"
        if e.detail:
            detail += f": {_text(e.detail, 40)}"
        if e.next_try_s is None:
            stage.finish(e.at, Status.FAILED, f"{detail}; no further try")
        else:
            stage.detail = f"{detail} · next try in {e.next_try_s:.0f} s"

    def _budget(self, e: StageBudget) -> None:
        stage = {"ssh": StageId.SSH, "model": StageId.MODEL, "engine": StageId.ENGINE}.get(e.stage)
        if stage is not None and e.budget_s > 0:
            self.stages[stage].budget_s = e.budget_s

    def _host_key(self, e: HostKeyPinned) -> None:
        # "verified": the key pinned before create answered; "first use": trusted as it came.
        how = "verified" if e.before_create else "first use"
        self.stages[StageId.HOST_KEY].finish(e.at, Status.DONE, f"{_text(e.fingerprint)} {how}")

    def _agent(self, e: AgentStarted) -> None:
        resumed = " (re-attached)" if e.resumed else ""
        self.stages[StageId.AGENT].finish(e.at, Status.DONE, f"pid {e.pid}{resumed}")

    def _agent_exited(self, e: AgentExited) -> None:
        if e.before_ready:
            code = "?" if e.exit_code is None else str(e.exit_code)
            self.stages[StageId.ENGINE].finish(
                e.at, Status.FAILED, f"agent exited (code {code}) before ready"
            )

    # -- datastream records ---------------------------------------------------------------
    def record(self, channel: str, payload: bytes, at: float) -> bool:
        """One frame's record; `at` is used when the record has no time of its own."""
        try:
            value = json.loads(payload)
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
        when = _num(value.get("at")) or at
        kind = value.get("type")
        if self._worker_record(value, kind, when):
            return True
        if kind == "OrchBootstrap":
            return self._orch_phase(value, when)
        if kind == NODE_AGENT_PHASE:
            if value.get("phase") == WATCHDOG_PHASE:
                return self._watchdog_phase(value, when)
            if value.get("phase") == BOOT_GUARD_PHASE:
                return self._boot_guard_phase(value, when)
            return self._agent_phase(value, when)
        if kind == NODE_AGENT_PROGRESS:
            if value.get("phase") == WATCHDOG_PHASE:
                return self._watchdog_progress(value, when)
            return self._agent_progress(value, when)
        if kind == WEIGHTS_LOADED:
            return self._weights_loaded(value, when)
        if kind == ENGINE_OFFLOAD:
            return self._offload(value, when)
        if kind == WORKER_FATAL:
            reason = _text(value.get("reason")) or "the node cannot serve"
            self.stages[StageId.ENGINE].finish(when, Status.FAILED, reason)
            self.stages[StageId.ENGINE].full = _detail_text(value, FULL_CHARS)
            return True
        return False

    def _phase_stage(self, phase: str) -> Stage | None:
        if phase == "model":
            return self.stages[StageId.MODEL]
        if phase in ("engine_start", "engine_health"):
            return self.stages[StageId.ENGINE]
        return None

    def _finish_by_status(self, stage: Stage, status: str, when: float, detail: str) -> None:
        if status == "started":
            stage.start(when)
        elif status == "ready":
            stage.finish(when, Status.DONE, detail or stage.detail)
        elif status == "failed":
            stage.finish(when, Status.FAILED, detail or "failed")

    def _orch_phase(self, value: Mapping[str, Any], when: float) -> bool:
        phase = _text(value.get("phase"), 32)
        status = _text(value.get("status"), 16)
        if not phase:
            return False
        detail = _detail_text(value.get("detail"))
        if phase in _ORCH_FROM_EVENTS or phase in _ORCH_QUIET:
            return True
        stage = self._phase_stage(phase)
        if stage is None:
            stage = self.extra.get(phase)
            if stage is None:
                if len(self.extra) >= EXTRA_PHASES_KEPT:
                    self.extra.pop(next(iter(self.extra)))
                stage = self.extra[phase] = Stage(phase.replace("_", " "))
        self._finish_by_status(stage, status, when, detail)
        if status == "failed":
            stage.full = _detail_text(value.get("detail"), FULL_CHARS)
        return True

    def _agent_phase(self, value: Mapping[str, Any], when: float) -> bool:
        phase = _text(value.get("phase"), 32)
        status = _text(value.get("status"), 16)
        switch = self.stages[StageId.WATCHDOG]
        if phase in _AFTER_VERDICT and switch.status is Status.PENDING and not switch.detail:
            # The verdict comes right after config: a node past it reported none.
            switch.detail = "none reported: no switch on this node"
            switch.compact = "none reported"
            if phase == "probe":
                return True
        stage = self._phase_stage(phase)
        if stage is None:
            return False
        detail = _model_detail(value.get("detail")) if phase == "model" else ""
        if phase == "engine_start" and status == "ready":
            stage.start(when)  # started is not healthy: wait for engine_health/WeightsLoaded
            stage.detail = "engine started, loading"
            return True
        if status == "failed":
            detail = _detail_text(value.get("detail"))
        self._finish_by_status(stage, status, when, detail)
        if status == "failed":
            stage.full = _detail_text(value.get("detail"), FULL_CHARS)
        return True

    # -- the node's dead-man's switch -----------------------------------------------------
    def _watchdog_phase(self, value: Mapping[str, Any], when: float) -> bool:
        """`ready` (armed, with deadline and silence limit) or `failed` (the reason) at
        start; `started` when it fires; a final `ready` once it destroyed its lease (or, on
        a local node, ended it)."""
        stage = self.stages[StageId.WATCHDOG]
        status = _text(value.get("status"), 16)
        raw = value.get("detail")
        detail: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        trigger = _text(detail.get("trigger"), 16) or "?"
        local = detail.get("action") == "end" or detail.get("ended") is True
        if status == "started" and trigger == "idle_stop" and self.idle_stop is not None:
            self.idle_stop.status, self.idle_stop.ended_at = Status.ACTIVE, None
            self.idle_stop.detail = f"fired: no request for {self._idle_window()}"
            self.idle_stop.compact = "fired"
        if status == "started":
            self.switch = None  # it fired: control lines no longer change what the row says
            stage.status, stage.started_at, stage.ended_at = Status.ACTIVE, when, None
            stage.progress = None
            stage.detail = f"{'ending the node' if local else 'destroying its lease'} ({trigger})"
            stage.compact = ""
        elif status == "failed":
            reason = _reason(detail.get("reason")) or "cannot destroy its own lease"
            stage.finish(when, Status.FAILED, reason)
        elif status == "ready" and detail.get("destroyed") is True:
            stage.finish(when, Status.DONE, f"destroyed its lease ({trigger})")
        elif status == "ready" and detail.get("ended") is True:
            stage.finish(when, Status.DONE, f"ended the node ({trigger})")
        elif status == "ready":
            elapsed = _num(value.get("elapsed_ms"))
            if stage.started_at is None and elapsed is not None and elapsed >= 0:
                stage.started_at = when - elapsed / 1000
            self.switch = SwitchVerdict(
                deadline_at=finite(_num(detail.get("deadline_at"))),
                idle_mins=finite(_num(detail.get("idle_teardown_mins"))),
                armed=detail.get("armed") is True,
                idle_armed=detail.get("idle_armed") is not False,
            )
            stage.finish(when, Status.DONE, "")
            self._switch_detail(stage, self.switch, when)
            self._idle_stop_verdict(finite(_num(detail.get("idle_stop_mins"))))
        else:
            return False
        return True

    # -- the node's idle stop ---------------------------------------------------------------
    def _idle_window(self) -> str:
        return f"{self.idle_stop_mins:g} min" if self.idle_stop_mins else "its window"

    def _idle_stop_verdict(self, mins: float | None) -> None:
        self.idle_stop_mins = mins if mins is not None and mins > 0 else None
        if self.idle_stop_mins is None:
            self.idle_stop = None
            return
        self.idle_stop = Stage("idle stop")
        self.idle_stop.detail = f"arms once the model serves: after {self._idle_window()} unused"
        self.idle_stop.compact = f"{self._idle_window()}, once serving"

    def _idle_stop_progress(self, state: str, value: Mapping[str, Any], when: float) -> bool:
        """armed (serving) / warning (it stops soon) / postponed (a request came)."""
        mins = finite(_num(value.get("idle_stop_mins")))
        if mins is not None and mins > 0:
            self.idle_stop_mins = mins
        stage = self.idle_stop = self.idle_stop or Stage("idle stop")
        if state == "idle_stop_warning":
            left = finite(_num(value.get("stops_in_s")))
            secs = f"{left:.0f} s" if left is not None else "moments"
            stage.status, stage.started_at, stage.ended_at = Status.ACTIVE, when, None
            stage.budget_s = left  # the time column counts down to the stop
            stage.detail = f"stops the node in {secs}: no request yet; a prompt or a key keeps it"
            stage.compact = f"stops in {secs}"
            return True
        stage.budget_s = None
        stage.finish(when, Status.DONE, f"armed: ends the node after {self._idle_window()} "
                     "with no request")
        stage.compact = f"armed, {self._idle_window()}"
        return True

    def _boot_guard_phase(self, value: Mapping[str, Any], when: float) -> bool:
        """The boot guard's verdict as the agent read it when it started."""
        raw = value.get("detail")
        detail: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        state = _text(detail.get("state"), 16)
        stage = self.guard = Stage("boot guard")
        if value.get("status") == "failed" or state == "failed":
            reason = _reason(detail.get("reason")) or "cannot run on this node"
            stage.finish(when, Status.FAILED, reason)
            stage.full = _detail_text(detail, FULL_CHARS)
            return True
        grace = _num(detail.get("grace_s"))
        texts = {
            "armed": (
                f"armed ({_text(detail.get('tool'), 16) or '?'}, "
                f"{grace / 60 if grace is not None else 0:g} min); stood down: agent attached",
                "stood down",
            ),
            "off": ("off: [limits] boot_grace_mins = 0", "off"),
            "none": ("none ran on this node (its start command armed none)", "none ran"),
            "not_needed": ("not needed: this node does not bill", "not needed"),
        }
        full, compact = texts.get(state, ("", ""))
        if not full:
            return False
        stage.finish(when, Status.DONE if state == "armed" else Status.SKIPPED, full)
        stage.compact = compact
        return True

    def _watchdog_progress(self, value: Mapping[str, Any], when: float) -> bool:
        """`detached` / `attached`: the silence switch stood down or re-armed; the idle
        stop's states."""
        state = _text(value.get("state"), 24)
        if state.startswith("idle_stop_") and self.switch is not None:
            return self._idle_stop_progress(state, value, when)
        stage, switch = self.stages[StageId.WATCHDOG], self.switch
        if stage.status is not Status.DONE or switch is None or "idle_armed" not in value:
            return False  # also once it fired: the row then tells the destroy
        switch.idle_armed = value.get("idle_armed") is True
        switch.armed = switch.idle_armed or switch.deadline_at is not None
        self._switch_detail(stage, switch, when)
        return True

    def _switch_detail(self, stage: Stage, switch: SwitchVerdict, when: float) -> None:
        for compact in (False, True):
            text = armed_text(
                armed=switch.armed,
                deadline_at=switch.deadline_at,
                idle_mins=switch.idle_mins,
                idle_armed=switch.idle_armed,
                tz=self.tz,
                ref=when,
                compact=compact,
            )
            if compact:
                stage.compact = text
            else:
                stage.detail = text

    def _agent_progress(self, value: Mapping[str, Any], when: float) -> bool:
        phase = _text(value.get("phase"), 32)
        stage = self._phase_stage(phase)
        if stage is None or stage.status in (Status.DONE, Status.FAILED):
            return False
        stage.start(when)
        state = _text(value.get("state"), 24)
        began = _num(value.get("prefetch_started_at"))
        if phase == "model" and began is not None and began <= when:
            # The boot fetch's own start (a replay has no engine event for it).
            stage.started_at = min(stage.started_at or when, began)
        if phase == "model":
            done, total = _num(value.get("bytes_done")), _num(value.get("bytes_total"))
            rate = _num(value.get("rate_bps"))
            parts = [state or "downloading"]
            stage.compact = parts[0]
            if done is not None and total:
                stage.progress = min(1.0, done / total)
                parts.append(f"{size_text(done)} of {size_text(total)}")
                stage.compact = f"{stage.progress * 100:.0f}% {parts[0]}"
            elif done is not None:
                parts.append(size_text(done))
            if rate:
                parts.append(f"{size_text(rate)}/s")
            stage.detail = " ".join(parts)
        else:
            stage.detail = f"{state or 'waiting'}"
        return True

    def _weights_loaded(self, value: Mapping[str, Any], when: float) -> bool:
        model = _text(value.get("model_id"), 40) or "model"
        port = _num(value.get("port"))
        load_ms = _num(value.get("load_ms"))
        detail = model + (f" on :{port:.0f}" if port else "")
        if load_ms is not None:
            detail += f", loaded in {load_ms / 1000:.1f} s"
        detail += self._placement(value.get("placement_mib"))
        self.stages[StageId.ENGINE].finish(when, Status.DONE, detail)
        return True

    def _offload(self, value: dict[str, Any], when: float) -> bool:
        """`offload  33/33 layers · CUDA0 4,403 MiB`: the engine's own load log on a node with
        GPUs; short of what was asked, the row fails with why (or says it was allowed)."""
        report = offload_report(value)
        if report is None:
            return False
        row = self.offload = Stage("offload")
        summary = " ".join(clean_line(report.summary(), DETAIL_CHARS).split())
        if report.ok:
            row.finish(when, Status.DONE, summary)
        elif report.allowed:
            row.finish(when, Status.DONE, f"{summary} (short: allow_partial_offload)")
            row.full = f"{summary}; {_reason(report.problem)}"
        else:
            row.finish(when, Status.FAILED, summary)
            row.full = f"{summary}; {_reason(report.problem)}"
        row.compact = f"{report.layers}/{report.total} layers"
        return True

    # -- a multi-node run's workers ------------------------------------------------------
    def _worker_record(self, value: Mapping[str, Any], kind: object, when: float) -> bool:
        """A worker node's record goes to its own row (its config phase says its role)."""
        node = value.get("node_id")
        if not isinstance(node, int) or isinstance(node, bool):
            return False
        detail = value.get("detail")
        if kind == NODE_AGENT_PHASE and isinstance(detail, dict) and detail.get("role") == "worker":
            self.workers.setdefault(node, Stage(f"worker node {node}"))
        row = self.workers.get(node)
        if row is None:
            return False
        if kind == RPC_SERVER_READY:
            endpoint = _text(value.get("endpoint"), 40)
            self._worker_endpoints[endpoint] = node
            row.finish(when, Status.DONE, f"RPC server on {endpoint}")
        elif kind == WORKER_FATAL:
            row.finish(when, Status.FAILED, _text(value.get("reason")) or "failed")
        elif kind == NODE_AGENT_PHASE and value.get("status") == "failed":
            row.finish(when, Status.FAILED, _detail_text(detail) or "failed")
        elif kind in (NODE_AGENT_PHASE, NODE_AGENT_PROGRESS) and row.status is Status.PENDING:
            row.start(when)
            row.detail = "starting its RPC server"
        return True

    def _placement(self, raw: object) -> str:
        """`; MiB here 0.3, node 2 1.2`: where the model's buffers are, per node."""
        if not isinstance(raw, dict):
            return ""
        here, parts = 0.0, []
        for device, mib in raw.items():
            size = _num(mib)
            if size is None:
                continue
            node = self._worker_endpoints.get(device) if isinstance(device, str) else None
            if node is None:
                here += size
                continue
            parts.append(f"node {node} {size:.1f}")
            row = self.workers[node]
            row.detail = f"{row.detail.split(' · ')[0]} · {size:.1f} MiB"
        return f"; MiB here {here:.1f}, " + ", ".join(parts) if parts else ""


# Orchestrator phases whose facts a fixed row takes from engine events (the seed's names,
# and this app's earlier ones for older archives): not read twice.
_ORCH_FROM_EVENTS = frozenset({"provider_start", "lease", "ssh", "host_key", "weights_loaded",
                               "weights"})
# The seed's phases that only restate a row or the Prompt pane: on the channel, not here.
_ORCH_QUIET = frozenset({"node_provisioner", "node_spec", "node_runtime_ready", "watchdog",
                         "prompt_rpc", "prompt_loop", "serve_prompts", "shutdown"})
# The orchestrator's phases that come before a lease runs; any other extra phase (teardown,
# orch exit) comes after the fixed stages, whatever order its frames arrived in.
BEFORE_LEASE_PHASES = ("config", "offers")
# The agent's phases after the switch's verdict (which comes right after config).
_AFTER_VERDICT = ("probe", "model", "engine_start", "engine_health")


def _reason(value: object) -> str:
    """A node's reason: one line, no escapes or controls, bounded; not folded to ASCII
    (a reason may hold a "≥")."""
    return " ".join(clean_line(value, REASON_CHARS).split()) if isinstance(value, str) else ""


def _detail_text(detail: object, limit: int = DETAIL_CHARS) -> str:
    """A phase's detail as one line: its reason or error, else `key value` pairs."""
    if isinstance(detail, dict):
        for key in ("reason", "error", "message"):
            if isinstance(detail.get(key), str):
                text = _text(detail[key], limit)
                fix = detail.get("fix")
                if limit > DETAIL_CHARS and isinstance(fix, str) and fix:
                    text += f" — {_text(fix, limit)}"
                return text
        pairs = (
            f"{key} {value if isinstance(value, str | int | float) else json.dumps(value)}"
            for key, value in detail.items()
            if value not in (None, "")
        )
        return _text(", ".join(pairs), limit)
    return _text(detail, limit) if isinstance(detail, str) else ""


def _model_detail(detail: object) -> str:
    if not isinstance(detail, dict):
        return ""
    # A hub file the hub gave no sha256 for: its bytes were not checked, and the row says so.
    unchecked = "unverified" if detail.get("verified") is False else ""
    if detail.get("cached") is True:
        return " ".join(p for p in ("cached", unchecked) if p)
    size = _num(detail.get("bytes"))
    source = _text(detail.get("source"), 16)
    return " ".join(p for p in (source, size_text(size) if size else "", unchecked) if p)


_EVENT_HANDLERS: dict[type[EngineEvent], Callable[[BootstrapModel, Any], None]] = {
    AttemptStarted: BootstrapModel._attempt,
    WalkFailed: BootstrapModel._walk_failed,
    NodeFailed: BootstrapModel._node_failed,
    LeasePending: BootstrapModel._pending,
    LeaseRunning: BootstrapModel._running,
    PrefetchStarted: BootstrapModel._prefetch,
    SshAttempt: BootstrapModel._ssh,
    HostKeyPinned: BootstrapModel._host_key,
    AgentStarted: BootstrapModel._agent,
    AgentExited: BootstrapModel._agent_exited,
    StageBudget: BootstrapModel._budget,
}
