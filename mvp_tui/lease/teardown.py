"""Confirmed teardown: destroy, then wait until the provider no longer knows the instance.

A delete is claimed only when the provider confirms it (`get` answers GONE). A destroy that
keeps failing, or an instance still listed after `delete_timeout_s`, stays `deleting` in the
run record and is reported as unconfirmed: it may still bill (the CLI exits 3).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.events import EventSink
from mvp_tui.lease import attempt_secrets
from mvp_tui.lease.events import DeleteReason, LeaseDeleted, LeaseDeleteUnconfirmed, LeaseDeleting
from mvp_tui.lease.pod_logs import save_last_logs
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordError, RecordStore, RunRecord
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.spend import lease_spend_usd, lease_uptime_s
from mvp_tui.providers.base import (
    BillingReader,
    DestroyOutcome,
    DestroyResult,
    LeaseState,
    Provider,
    ProviderError,
)
from mvp_tui.untrusted import one_line_ascii

Clock = Callable[[], float]
# Deletes of the run's own lease read its last logs first (seed 003 `remove`); duplicates
# and strays of unclear creates do not (seed `delete_duplicate`).
_LOGS_KEPT = frozenset(
    {
        DeleteReason.REQUESTED,
        DeleteReason.NOT_READY,
        DeleteReason.INTERRUPTED,
        DeleteReason.HOST_FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class DeleteCheck:
    """The end of one confirmed delete."""

    confirmed: bool
    reason: str = ""  # why it is not confirmed
    destroy_calls: int = 0
    found: bool = True  # False: the first destroy answered that the instance was already gone


async def is_gone(provider: Provider, provider_id: str) -> bool | None:
    """True when the provider no longer knows the instance, None when it cannot be asked."""
    try:
        status = await provider.get(provider_id)
    except ProviderError:
        return None
    return status.state is LeaseState.GONE


async def delete_confirmed(
    provider: Provider, provider_id: str, settings: WalkSettings
) -> DeleteCheck:
    """Destroy `provider_id` (retrying FAILED answers with back-off), then poll until GONE."""
    calls = 0
    failures = 0
    found = True
    while True:
        calls += 1
        try:
            result = await provider.destroy(provider_id)
        except ProviderError as exc:
            result = DestroyResult(DestroyOutcome.FAILED, one_line_ascii(str(exc)), exc.http_status)
        if calls == 1 and result.outcome is DestroyOutcome.GONE:
            found = False
        if result.outcome is not DestroyOutcome.FAILED:
            break
        failures += 1
        if failures >= settings.destroy_attempts:
            if await is_gone(provider, provider_id):
                return DeleteCheck(True, destroy_calls=calls)
            return DeleteCheck(
                False,
                f"destroy failed {failures} times (last: {_answer(result)})",
                calls,
            )
        await settings.sleep(settings.destroy_backoff(failures))
    deadline = time.monotonic() + settings.delete_timeout_s
    while True:
        if await is_gone(provider, provider_id):
            return DeleteCheck(True, destroy_calls=calls, found=found)
        if time.monotonic() >= deadline:
            return DeleteCheck(
                False,
                f"still listed {settings.delete_timeout_s:g} s after the destroy was accepted",
                calls,
            )
        await settings.sleep(settings.delete_poll_s)


BILLING_TIMEOUT_S = 10.0


async def billed(provider: Provider, provider_id: str) -> float | None:
    """The provider's own figure for a deleted lease, when it publishes one. A receipt, not
    a check: a slow or failing billing API never holds up or fails the teardown."""
    if not isinstance(provider, BillingReader):
        return None
    try:
        async with asyncio.timeout(BILLING_TIMEOUT_S):
            return await provider.billed_usd(provider_id)
    except (ProviderError, TimeoutError, OSError):
        return None


def _answer(result: DestroyResult) -> str:
    status = f"HTTP {result.http_status}" if result.http_status is not None else "no answer"
    return f"{status}: {result.detail}" if result.detail else status


async def teardown_lease(
    provider: Provider,
    store: RecordStore,
    record: RunRecord,
    lease: LeaseRecord,
    sink: EventSink,
    settings: WalkSettings,
    *,
    reason: DeleteReason,
    clock: Clock = time.time,
) -> bool:
    """Destroy one recorded lease, confirmed; record and emit the end. True when confirmed.
    Once confirmed, the attempt's secret (RunPod: its host key) is deleted too.

    The destroy is sent even when the record cannot be saved first; a failure to record the
    confirmed end is raised after the event is emitted.
    """
    provider_id = lease.provider_id
    if provider_id is None:
        raise ValueError(f"lease {lease.label} has no provider id: look it up by label first")
    if lease.state is LeaseRecordState.DELETED:
        return True
    lease.state = LeaseRecordState.DELETING
    lease.detail = f"deleting ({reason.value})"
    save_error: OSError | None = None
    try:
        store.save(record)
    except OSError as exc:
        save_error = exc
    sink(LeaseDeleting(at=clock(), run_id=record.run_id, provider_id=provider_id, reason=reason))
    # Seed 003 `remove`: one look first, only to name who deleted it (the destroy is always
    # sent: a one-off 404 never passes a live instance for gone); a live one's last log
    # lines are kept first, as the provider drops them with it.
    gone_before = await is_gone(provider, provider_id)
    if not gone_before and reason in _LOGS_KEPT:
        await save_last_logs(provider, store, record.run_id, provider_id)
    check = await delete_confirmed(provider, provider_id, settings)
    now = clock()
    by = "node" if gone_before and not check.found else "mvp-tui"
    if check.confirmed:
        lease.state = LeaseRecordState.DELETED
        lease.deleted_at = now
        lease.deleted_by = by
        lease.detail = (
            f"deleted ({reason.value})"
            if by == "mvp-tui"
            else f"already gone when deleted ({reason.value}): deleted by its node"
        )
    else:
        lease.detail = f"delete not confirmed ({reason.value}): {check.reason}"
    try:
        store.save(record)
    except OSError as exc:
        save_error = exc
    if check.confirmed:
        # The provider's own figure, where it has one, kept beside our estimate (a receipt
        # rebuilt from the record shows it too).
        lease.billed_usd = await billed(provider, provider_id)
        if lease.billed_usd is not None:
            try:
                store.save(record)
            except OSError as exc:
                save_error = exc
        sink(
            LeaseDeleted(
                at=now,
                run_id=record.run_id,
                provider_id=provider_id,
                uptime_s=round(lease_uptime_s(lease, now), 3),
                spend_usd=round(lease_spend_usd(lease, now), 6),
                billed_usd=lease.billed_usd,
                deleted_by=by,
            )
        )
        # Its pod is gone: the secret holding its host key goes too (RunPod).
        await attempt_secrets.release(
            provider, store, record, sink, settings, labels={lease.label}, clock=clock
        )
    else:
        sink(
            LeaseDeleteUnconfirmed(
                at=now, run_id=record.run_id, provider_id=provider_id, reason=check.reason
            )
        )
    if save_error is not None:
        raise save_error
    return check.confirmed


async def teardown(
    provider: Provider,
    store: RecordStore,
    run_id: str,
    provider_id: str,
    sink: EventSink,
    settings: WalkSettings,
    *,
    reason: DeleteReason = DeleteReason.REQUESTED,
    clock: Clock = time.time,
) -> bool:
    """Tear down one lease of a recorded run, confirmed. False: it may still bill (exit 3)."""
    record = store.load(run_id)
    lease = record.lease_by_id(provider_id)
    if lease is None:
        raise RecordError(
            store.record_path(run_id),
            f"run {run_id} has no lease {provider_id!r}",
            "pick a lease listed by `mvp-tui ls`",
        )
    return await teardown_lease(
        provider, store, record, lease, sink, settings, reason=reason, clock=clock
    )
