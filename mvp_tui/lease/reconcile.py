"""Finding our instances by label: after an unclear create, after a failed walk, after a crash.

Listings ask the provider by label prefix and keep only labels that parse as this run's
(exact match, so run r-1 never claims r-10's instances). Whatever is found is entered in the
run record before anything is done to it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from mvp_tui.events import EventSink
from mvp_tui.labels import belongs_to_run, node_prefix, run_prefix
from mvp_tui.lease.events import DeleteReason, Sweep
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore, RunRecord
from mvp_tui.lease.settings import Sleep, WalkSettings
from mvp_tui.lease.teardown import Clock, teardown_lease
from mvp_tui.providers.base import LeaseState, LeaseStatus, Provider, ProviderError


@dataclass(frozen=True, slots=True)
class Found:
    """What a reconciliation found: the attempt's instance and any other of the same scope."""

    adopted: LeaseStatus | None
    others: tuple[LeaseStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class SweepResult:
    listed: bool  # False: the provider could not be asked
    found: tuple[str, ...] = ()
    destroyed: tuple[str, ...] = ()
    unconfirmed: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return self.listed and not self.unconfirmed


def scope_prefix(record: RunRecord, node_id: int | None) -> str:
    """The label prefix of the whole run, or of one of its nodes."""
    if node_id is None:
        return run_prefix(record.label_prefix, record.owner_tag, record.run_id)
    return node_prefix(record.label_prefix, record.owner_tag, record.run_id, node_id)


async def list_ours(
    provider: Provider, record: RunRecord, node_id: int | None
) -> list[LeaseStatus]:
    """Live instances whose label is an attempt label of this run (and node). Raises
    ProviderError when the provider cannot be asked."""
    listed = await provider.list_by_label(scope_prefix(record, node_id))
    return [
        s
        for s in listed
        if s.state is not LeaseState.GONE
        and belongs_to_run(s.label, record.label_prefix, record.owner_tag, record.run_id, node_id)
    ]


async def find_by_label(
    provider: Provider,
    record: RunRecord,
    label: str,
    node_id: int,
    waits_s: Sequence[float],
    sleep: Sleep,
) -> Found:
    """After each wait, list the node's instances; return the one labelled `label` and the
    others of the node (duplicates of earlier unclear creates). Not found after every wait →
    `Found(None)`. Raises ProviderError when the provider cannot be asked."""
    for wait in waits_s:
        await sleep(wait)
        ours = await list_ours(provider, record, node_id)
        mine = [s for s in ours if s.label == label]
        if mine:
            adopted = min(mine, key=lambda s: s.provider_id)
            others = tuple(s for s in ours if s.provider_id != adopted.provider_id)
            return Found(adopted, others)
    return Found(None)


def track(record: RunRecord, status: LeaseStatus, now: float) -> LeaseRecord:
    """The record's lease for a listed instance: matched by provider id, else by the label of
    a placeholder with no id yet, else entered as a new lease (a stray)."""
    lease = record.lease_by_id(status.provider_id)
    if lease is not None:
        return lease
    label = status.label or ""
    placeholder = next(
        (x for x in record.leases if x.provider_id is None and x.label == label), None
    )
    if placeholder is not None:
        placeholder.provider_id = status.provider_id
        placeholder.state = LeaseRecordState.PENDING
        placeholder.created_at = placeholder.created_at or status.started_at or now
        return placeholder
    attempt = next((a for a in record.attempts if a.label == label), None)
    lease = LeaseRecord(
        provider=record.provider,
        label=label,
        node_id=attempt.node_id if attempt else 0,
        offer_id=attempt.offer_id if attempt else "",
        gpu_name=attempt.gpu_name if attempt else "",
        price_per_hour=status.price_per_hour or (attempt.price_per_hour if attempt else 0.0),
        state=LeaseRecordState.PENDING,
        provider_id=status.provider_id,
        created_at=status.started_at or now,
        detail="found by its label",
    )
    record.leases.append(lease)
    return lease


def drop_unlisted_placeholders(
    record: RunRecord, listed: Sequence[LeaseStatus], node_id: int | None
) -> None:
    """Forget placeholders of unclear creates that a complete listing does not show: the
    provider confirms no such instance exists."""
    labels = {s.label for s in listed}
    record.leases = [
        x
        for x in record.leases
        if not (
            x.provider_id is None
            and x.state in (LeaseRecordState.UNKNOWN, LeaseRecordState.CREATING)
            and (node_id is None or x.node_id == node_id)
            and x.label not in labels
        )
    ]


async def sweep(
    provider: Provider,
    store: RecordStore,
    record: RunRecord,
    sink: EventSink,
    settings: WalkSettings,
    *,
    node_id: int | None,
    keep: str | None = None,
    reason: DeleteReason = DeleteReason.STRAY,
    clock: Clock = time.time,
    forget_unlisted: bool = True,
    quiet_when_clean: bool = False,
) -> SweepResult:
    """Destroy (confirmed) every instance of this run (or node) but `keep`, recording each
    first. Placeholders the listing does not show are forgotten when `forget_unlisted` (not
    after a cancelled create, whose call may still be in flight). `quiet_when_clean`: no
    `Sweep` event when the listing found nothing to destroy (the routine sweep after ready)."""
    prefix = scope_prefix(record, node_id)
    try:
        ours = await list_ours(provider, record, node_id)
    except ProviderError:
        sink(
            Sweep(
                at=clock(),
                run_id=record.run_id,
                prefix=prefix,
                found=(),
                destroyed=(),
                unconfirmed=(),
                listed=False,
            )
        )
        return SweepResult(listed=False)
    if forget_unlisted:
        drop_unlisted_placeholders(record, ours, node_id)
    strays = [s for s in ours if s.provider_id != keep]
    leases = [track(record, s, clock()) for s in strays]
    store.save(record)
    destroyed: list[str] = []
    unconfirmed: list[str] = []
    for lease in leases:
        ok = await teardown_lease(
            provider, store, record, lease, sink, settings, reason=reason, clock=clock
        )
        (destroyed if ok else unconfirmed).append(lease.provider_id or "")
    found = tuple(s.provider_id for s in strays)
    if quiet_when_clean and not found:
        return SweepResult(True)
    sink(
        Sweep(
            at=clock(),
            run_id=record.run_id,
            prefix=prefix,
            found=found,
            destroyed=tuple(destroyed),
            unconfirmed=tuple(unconfirmed),
            listed=True,
        )
    )
    return SweepResult(True, found, tuple(destroyed), tuple(unconfirmed))
