"""Attempts of a run: the steps between one host and the next (`Attempts`: forgetting the
last node before the next lease, discarding a failed attempt — its node closed, its lease
destroyed, confirmed, and journalled — and saying the walk's order). The stage the current
attempt reached is `AttemptStage`'s (engine/attempt_stage.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from mvp_tui.datastream.bridge import FRAME_SOURCE
from mvp_tui.engine.attempt_stage import AttemptStage
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import (
    AttemptAbandoned,
    WalkOrderSaid,
)
from mvp_tui.engine.failures import (
    AttemptFailure,
)
from mvp_tui.engine.run_bringup import NodeLink
from mvp_tui.engine.run_core import NodeVerdicts
from mvp_tui.lease.events import DeleteReason
from mvp_tui.lease.teardown import teardown_lease
from mvp_tui.providers.base import Offer


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
