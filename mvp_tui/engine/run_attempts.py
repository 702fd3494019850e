"""Attempts of a run: the stage the current one reached (`AttemptStage`: its stage times,
its outcome in the host journal, the ready summary), and the steps between one host and
the next (`Attempts`: forgetting the last node before the next lease, discarding a failed
attempt — its node closed, its lease destroyed, confirmed, and journalled — and saying the
walk's order).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mvp_tui.datastream.bridge import FRAME_SOURCE
from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import (
    AttemptAbandoned,
    ReadySummary,
    WalkOrderSaid,
)
from mvp_tui.engine.failures import (
    AGENT_PHASE_STAGES,
    AttemptFailure,
    FailureScope,
    Stage,
)
from mvp_tui.engine.ready_summary import stage_parts, summary_text
from mvp_tui.engine.run_core import NodeVerdicts
from mvp_tui.lease.events import DeleteReason
from mvp_tui.lease.host_journal import (
    HostJournal,
    HostOutcome,
    Offload,
    config_model_key,
    host_key,
)
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.lease.teardown import teardown_lease
from mvp_tui.node_protocol import (
    ENGINE_OFFLOAD,
    NODE_AGENT_PHASE,
    is_agent_channel,
    offload_report,
    parse_record,
    record_type,
)
from mvp_tui.providers.base import Offer
from mvp_tui.providers.prefetch import wants_prefetch

if TYPE_CHECKING:
    from mvp_tui.engine.run_bringup import NodeLink


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


@dataclass(eq=False)
class Attempts:
    """Attempts: the steps between one host and the next."""

    ctx: RunContext
    leases: RunLeases
    link: NodeLink
    verdicts: NodeVerdicts
    attempt: AttemptStage

    def begin_attempt(self) -> None:
        """Forget the last attempt's node (its verdicts, its session, its URL) before the walk
        leases the next; what was leased stays in `past_leases` (spend and hours count it)."""
        self.verdicts.reset()
        self.link.forget_node()
        self.ctx.bridge.frame_source = FRAME_SOURCE  # the next node's bootstrap stdio first
        self.attempt.begin()

    async def discard_attempt(self, failure: AttemptFailure) -> bool:
        """End the failed attempt's node: its session closed (agent stopped, bounded), its
        lease destroyed, confirmed; recorded with its stage and reason. True when confirmed
        gone (False: it may bill, and no other lease may be made)."""
        ctx = self.ctx
        lease = self.leases.lease_record
        ctx.emit(
            AttemptAbandoned(
                at=ctx.clock(),
                run_id=ctx.run_id,
                provider_id=(lease.provider_id or "") if lease else "",
                offer_id=(lease.offer_id or "") if lease else "",
                stage=failure.stage.value,
                scope=failure.scope.value,
                failure_kind=failure.kind,
                reason=failure.reason,
                fix=failure.fix,
                stage_secs=tuple(self.attempt.stage_secs().items()),
            )
        )
        self.attempt.journal(failure)
        with contextlib.suppress(Exception):  # never let a close stop the destroy
            await self.link.close_session(shutdown_agent=True)
        if lease is None or lease.provider_id is None:
            return True
        record = ctx.store.load(ctx.run_id)
        kept = record.lease_by_id(lease.provider_id) or lease
        # The reason stays in the run record with the lease (teardown saves it).
        kept.failure = f"failed at {failure.stage.value} ({failure.kind}): {failure.reason}"[:600]
        ok = await teardown_lease(
            ctx.provider, ctx.store, record, kept, ctx.sink, ctx.walk_settings(),
            reason=DeleteReason.HOST_FAILED, clock=ctx.clock,
        )
        self.leases.retire(kept)
        return ok

    def announce_order(self, offers: Sequence[Offer], reason: str) -> None:
        """Say the order the walk will try the offers in (bootstrap channel, Leases pane)."""
        ctx = self.ctx
        names = tuple(f"{o.provider}:{o.offer_id}" for o in offers)
        ctx.emit(WalkOrderSaid(at=ctx.clock(), run_id=ctx.run_id, offers=names, reason=reason))
        ctx.log(
            "the walk tries, in order: " + (", ".join(names) or "(none left)") + f" ({reason})"
        )
