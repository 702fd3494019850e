"""The stage the current attempt of a run reached (`AttemptStage`): its stage times, read
from the agent's phases, its outcome in the host journal, and the ready summary. Its own
module because both the node link (engine/run_bringup.py) and the steps between one host and
the next (engine/run_attempts.py) hold it.
"""

from __future__ import annotations

import contextlib

from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import ReadySummary
from mvp_tui.engine.failures import AGENT_PHASE_STAGES, AttemptFailure, FailureScope, Stage
from mvp_tui.engine.ready_summary import stage_parts, summary_text
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, Offload, config_model_key, host_key
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.node_protocol import (
    ENGINE_OFFLOAD,
    NODE_AGENT_PHASE,
    is_agent_channel,
    offload_report,
    parse_record,
    record_type,
)
from mvp_tui.providers.prefetch import wants_prefetch


class AttemptStage:
    """The stage the current attempt reached, and when each stage began; its outcome."""

    def __init__(self, ctx: RunContext, leases: RunLeases) -> None:
        self.ctx = ctx
        self.leases = leases
        self.stage = Stage.CREATE
        self.stage_started: dict[Stage, float] = {}
        self.offload: Offload | None = None  # the engine's load log, as the agent read it
        ctx.hub.listeners.append(self._on_stage_frame)

    def detach(self) -> None:
        with contextlib.suppress(ValueError):
            self.ctx.hub.listeners.remove(self._on_stage_frame)

    def begin(self) -> None:
        """A new attempt: it starts at create, now."""
        self.stage, self.stage_started = Stage.CREATE, {Stage.CREATE: self.ctx.clock()}
        self.offload = None

    def _on_stage_frame(self, frame: Frame) -> None:
        """The agent's phases move the attempt's stage on (model, engine, serving); its
        `EngineOffload` is kept for the journal."""
        if not is_agent_channel(frame.channel):
            return
        record = parse_record(frame.payload)
        if record_type(record) == ENGINE_OFFLOAD:
            report = offload_report(record)
            if report is not None:
                self.offload = Offload.from_report(report)
            return
        if record_type(record) != NODE_AGENT_PHASE or record.get("status") != "started":
            return
        stage = AGENT_PHASE_STAGES.get(str(record.get("phase")))
        if stage is not None:
            self.reach(stage)

    def reach(self, stage: Stage) -> None:
        """The current attempt got to `stage` (never back)."""
        order = list(Stage)
        if order.index(stage) > order.index(self.stage):
            self.stage = stage
        self.stage_started.setdefault(stage, self.ctx.clock())

    def stage_secs(self, now: float | None = None) -> dict[str, float]:
        """Seconds the current attempt spent in each stage it reached."""
        end = self.ctx.clock() if now is None else now
        starts = sorted(self.stage_started.items(), key=lambda kv: list(Stage).index(kv[0]))
        out: dict[str, float] = {}
        for index, (stage, at) in enumerate(starts):
            until = starts[index + 1][1] if index + 1 < len(starts) else end
            out[stage.value] = round(max(0.0, until - at), 3)
        return out

    def journal(self, failure: AttemptFailure | None) -> None:
        """The attempt's outcome into the host journal (host memory for later runs)."""
        ctx = self.ctx
        lease = self.leases.lease_record
        offer = self.leases.offers.get(lease.offer_id) if lease is not None else None
        if lease is None or offer is None:
            return
        now = ctx.clock()
        outcome = HostOutcome(
            at=now,
            run_id=ctx.run_id,
            provider=offer.provider,
            host=host_key(offer),
            offer_id=offer.offer_id,
            gpu_name=offer.gpu_name,
            stage=failure.stage.value if failure is not None else Stage.SERVING.value,
            ok=failure is None,
            reason=failure.reason if failure is not None else "",
            stage_secs=self.stage_secs(now),
            cost_usd=round(self._lease_spend(lease, now), 6),
            blames_host=failure is None or failure.scope is FailureScope.HOST,
            image=ctx.config.node_image()[0],  # the board's ~ready: this host has it cached
            model=config_model_key(ctx.config),  # learned ~ready is per model served
            offload=self.offload,  # a GPU run that was a CPU run stays on record
        )
        try:
            HostJournal(ctx.config.state_dir, redact=ctx.redactor).append(outcome)
        except OSError as exc:  # host memory helps later runs; this one goes on
            ctx.log(f"the host journal could not be written: {exc}")

    def _lease_spend(self, lease: LeaseRecord, now: float) -> float:
        """One lease's spend so far, as the ledger (and so the user) sees it."""
        row = self.ctx.ledger.row(lease.provider_id, now) if lease.provider_id else None
        return row.spend_usd if row is not None else 0.0

    def ready_summary(self, now: float) -> ReadySummary:
        """Stage times of the attempt that served; the money of every host tried so far."""
        ctx, held = self.ctx, self.leases
        secs = self.stage_secs(now)
        leases = [*held.past, *([held.lease_record] if held.lease_record else [])]
        spent = ctx.ledger.spent(now, ctx.run_id)
        began = min((at for at in self.stage_started.values()), default=now)
        first = min((x.created_at for x in leases if x.created_at is not None), default=began)
        parts = stage_parts(secs)
        total = max(0.0, now - min(first, began))
        # The start command fetched the model during the boot and the SSH wait.
        fetched_at_boot = ctx.provider.info.ssh and wants_prefetch(ctx.node_env)
        overlapped = frozenset({"model"}) if fetched_at_boot else frozenset()
        return ReadySummary(at=now, run_id=ctx.run_id, seconds=round(total, 3), stages=parts,
                            spent_usd=round(spent, 6),
                            text=summary_text(total, parts, spent, overlapped))
