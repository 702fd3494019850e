"""Attempts of a run: forgetting the last node before the next lease, discarding a failed
attempt (its node closed, its lease destroyed, confirmed, and journalled) and saying the
walk's order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from mvp_tui.datastream.bridge import FRAME_SOURCE
from mvp_tui.engine.events import (
    AttemptAbandoned,
    WalkOrderSaid,
)
from mvp_tui.engine.failures import (
    AttemptFailure,
    Stage,
)
from mvp_tui.engine.run_teardown import TeardownPhase
from mvp_tui.lease.events import DeleteReason
from mvp_tui.lease.teardown import teardown_lease
from mvp_tui.providers.base import Offer


class AttemptsPhase(TeardownPhase):
    """Attempts: the steps between one host and the next."""

    def begin_attempt(self) -> None:
        """Forget the last attempt's node (its verdicts, its session, its URL) before the walk
        leases the next; what was leased stays in `past_leases` (spend and hours count it)."""
        self.watch.reset()
        self.watchdog_verdict = None
        self.boot_guard_verdict = None
        self._watchdog_failed.clear()
        self.verdict_wait.reset()
        self.local_url = None
        self.stall.engine_lost = None
        self.bridge.frame_source = FRAME_SOURCE  # the next node's bootstrap stdio first
        self.stage, self.stage_started = Stage.CREATE, {Stage.CREATE: self._clock()}

    async def discard_attempt(self, failure: AttemptFailure) -> bool:
        """End the failed attempt's node: its session closed (agent stopped, bounded), its
        lease destroyed, confirmed; recorded with its stage and reason. True when confirmed
        gone (False: it may bill, and no other lease may be made)."""
        lease = self.lease_record
        self.emit(
            AttemptAbandoned(
                at=self._clock(),
                run_id=self.run_id,
                provider_id=(lease.provider_id or "") if lease else "",
                offer_id=(lease.offer_id or "") if lease else "",
                stage=failure.stage.value,
                scope=failure.scope.value,
                failure_kind=failure.kind,
                reason=failure.reason,
                fix=failure.fix,
                stage_secs=tuple(self.stage_secs().items()),
            )
        )
        self._journal(failure)
        with contextlib.suppress(Exception):  # never let a close stop the destroy
            await self.close_session(shutdown_agent=True)
        if lease is None or lease.provider_id is None:
            return True
        record = self.store.load(self.run_id)
        kept = record.lease_by_id(lease.provider_id) or lease
        # The reason stays in the run record with the lease (teardown saves it).
        kept.failure = f"failed at {failure.stage.value} ({failure.kind}): {failure.reason}"[:600]
        ok = await teardown_lease(
            self.provider, self.store, record, kept, self._sink, self.walk_settings(),
            reason=DeleteReason.HOST_FAILED, clock=self._clock,
        )
        self.past_leases.append(kept)
        self.lease_record = None
        return ok

    def announce_order(self, offers: Sequence[Offer], reason: str) -> None:
        """Say the order the walk will try the offers in (bootstrap channel, Leases pane)."""
        names = tuple(f"{o.provider}:{o.offer_id}" for o in offers)
        self.emit(WalkOrderSaid(at=self._clock(), run_id=self.run_id, offers=names, reason=reason))
        self._sink_line(
            "the walk tries, in order: " + (", ".join(names) or "(none left)") + f" ({reason})"
        )
