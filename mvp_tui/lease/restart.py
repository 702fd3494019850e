"""After a restart or a crash: what open run records still lease, and tearing it down.

`reconcile_open_runs` asks the provider about every lease of every open record (by provider
id, and by the run's label prefix for creates that never got an answer) so the UI can offer
re-attach or teardown. `down` tears leases down, confirmed, from the records alone: it is what
`mvp-tui down RUN|--all` runs, and it works after the walk's process was killed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection
from dataclasses import dataclass

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease import attempt_secrets
from mvp_tui.lease.account_check import AccountCheck, check_account
from mvp_tui.lease.events import DeleteReason, SecretLeftOver
from mvp_tui.lease.reconcile import drop_unlisted_placeholders, list_ours, track
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordError, RecordStore, RunRecord
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.teardown import Clock, teardown_lease
from mvp_tui.providers.base import LeaseState, LeaseStatus, Provider, ProviderError


@dataclass(frozen=True, slots=True)
class OpenLease:
    """One lease of an open run, and whether the provider still has it."""

    run_id: str
    lease: LeaseRecord
    exists: bool | None  # None: the provider could not be asked
    status: LeaseStatus | None = None


@dataclass(frozen=True, slots=True)
class LeaseRef:
    run_id: str
    provider_id: str | None
    label: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DownReport:
    """What `down` destroyed (confirmed), what may still bill, and records it could not use."""

    confirmed: tuple[LeaseRef, ...]
    unconfirmed: tuple[LeaseRef, ...]
    skipped_runs: tuple[str, ...]  # open runs of another provider
    errors: tuple[str, ...]
    # Secrets (RunPod: host keys) still on the account: a warning, since they do not bill.
    secrets_left: tuple[SecretLeftOver, ...] = ()
    # What the provider listed under our prefix afterwards, one per provider and prefix
    # checked (none for a provider that never bills).
    accounts: tuple[AccountCheck, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing may still bill (exit 0); else the CLI exits 3. An account that
        could not be listed is a warning (each delete was confirmed by id); one that still
        holds ours is not."""
        return (
            not self.unconfirmed
            and not self.errors
            and not any(a.may_bill for a in self.accounts)
        )

    def account_lines(self) -> list[str]:
        """The account checks' words, less the leases `unconfirmed` names already."""
        return [line for check in self.accounts for line in check.lines(unconfirmed=False)]


async def _refresh(
    provider: Provider, store: RecordStore, record: RunRecord, clock: Clock
) -> dict[str, LeaseStatus] | None:
    """Enter every listed instance of the run into its record and forget placeholders the
    listing does not show. The listing by id, or None when the provider cannot be asked."""
    try:
        ours = await list_ours(provider, record, None)
    except ProviderError:
        return None
    drop_unlisted_placeholders(record, ours, None)
    now = clock()
    for status in ours:
        track(record, status, now)
    with contextlib.suppress(OSError):  # a record that cannot be saved must not stop a teardown
        store.save(record)
    return {s.provider_id: s for s in ours}


async def reconcile_open_runs(
    provider: Provider,
    store: RecordStore,
    clock: Clock = time.time,
    settings: WalkSettings | None = None,
    sink: EventSink | None = None,
) -> list[OpenLease]:
    """Every lease of this provider's open runs, with whether it still exists.

    A lease the provider confirms gone is recorded as deleted (and reported with
    exists=False); the secrets of instances gone are deleted (RunPod's host keys), in runs
    with no open lease too. Raises RecordError for a corrupt record: skipping it could hide
    a lease.
    """
    found: list[OpenLease] = []
    for record in store.open_runs():
        if record.provider != provider.info.name:
            continue
        listed = await _refresh(provider, store, record, clock)
        for lease in record.open_leases():
            exists, status = await _exists(provider, lease, listed)
            if exists is False and lease.provider_id is not None:
                lease.state = LeaseRecordState.DELETED
                lease.deleted_at = clock()
                lease.detail = "gone when checked after a restart"
            found.append(OpenLease(record.run_id, lease, exists, status))
        store.save(record)
    await release_gone_secrets(provider, store, settings, sink or _ignore, clock)
    return found


async def release_gone_secrets(
    provider: Provider,
    store: RecordStore,
    settings: WalkSettings | None = None,
    sink: EventSink | None = None,
    clock: Clock = time.time,
) -> list[SecretLeftOver]:
    """Delete the secrets, in every record of this provider, whose instances are gone."""
    if attempt_secrets.keeper(provider) is None:
        return []
    left: list[SecretLeftOver] = []
    for record in store.scan().runs:
        if record.provider == provider.info.name and any(s.deletable for s in record.secrets):
            left += await attempt_secrets.release(
                provider, store, record, sink or _ignore, settings or WalkSettings(),
                name_unknown=False, clock=clock,
            )
    return left


async def _exists(
    provider: Provider, lease: LeaseRecord, listed: dict[str, LeaseStatus] | None
) -> tuple[bool | None, LeaseStatus | None]:
    if lease.provider_id is None:
        return None, None  # a placeholder survives only when the listing failed
    if listed is not None and lease.provider_id in listed:
        return True, listed[lease.provider_id]
    try:
        status = await provider.get(lease.provider_id)
    except ProviderError:
        return None, None
    return status.state is not LeaseState.GONE, status


def _ignore(event: EngineEvent) -> None:
    return None


def runs_to_down(store: RecordStore, run_id: str | None) -> tuple[list[RunRecord], list[str]]:
    """The records `down` works on: run `run_id`, or every open run when None; with the
    records that could not be read (each may hide a lease: reported, never skipped)."""
    if run_id is not None:
        try:
            return [store.load(run_id)], []
        except RecordError as exc:
            return [], [str(exc)]
    scan = store.scan()
    # A run whose pods are all gone but whose secrets are not is still one to clean up.
    wanted = [r for r in scan.runs if r.is_open or any(s.deletable for s in r.secrets)]
    return wanted, [str(e) for e in scan.errors]


async def down(
    provider: Provider,
    store: RecordStore,
    run_id: str | None,
    sink: EventSink = _ignore,
    settings: WalkSettings | None = None,
    clock: Clock = time.time,
    *,
    label_prefix: str | None = None,
    account: bool = True,
    end_strangers: Collection[str] = (),
) -> DownReport:
    """Tear down, confirmed, every lease of run `run_id`, or of every open run when None
    (`mvp-tui down RUN|--all`). Then, for a provider that bills, the account check
    (`account_check.py`): what is ours (a record here holds it, or it carries this install's
    tag) listed under the run's label prefix (or under every prefix on record and
    `label_prefix`, when None) in scope is destroyed, confirmed, and unclear creates are
    looked up by label there; whatever else is named like ours is reported, never touched,
    but for the ids in `end_strangers` (listed to the person and confirmed). Without it
    (`account=False`, or a provider that never bills) untracked instances of the run are
    found by listing first."""
    settings = settings or WalkSettings()
    checking = account and provider.info.billing
    runs, errors = runs_to_down(store, run_id)
    confirmed: list[LeaseRef] = []
    unconfirmed: list[LeaseRef] = []
    skipped: list[str] = []
    secrets_left: list[SecretLeftOver] = []

    def noting(event: EngineEvent) -> None:
        # A teardown deletes its lease's secret (retried); what is left is noted, not retried.
        if isinstance(event, SecretLeftOver):
            secrets_left.append(event)
        sink(event)

    mine: list[RunRecord] = []
    torn_by_run: dict[str, set[str]] = {}
    for record in runs:
        if record.provider != provider.info.name:
            skipped.append(record.run_id)
            continue
        mine.append(record)
        if not checking:
            await _refresh(provider, store, record, clock)
        torn: set[str] = set()
        for lease in record.open_leases():
            if lease.provider_id is None and checking:
                continue  # an unclear create: looked up by its label in the account check
            torn.add(lease.label)
            ref = LeaseRef(record.run_id, lease.provider_id, lease.label)
            if lease.provider_id is None:
                unconfirmed.append(_with_reason(ref, _UNCLEAR))
                continue
            ok = await _teardown_one(provider, store, record, lease, noting, settings, clock)
            if ok:
                confirmed.append(ref)
            else:
                unconfirmed.append(_with_reason(ref, lease.detail))
        if not checking:
            await _release_rest(provider, store, record, torn, noting, settings, clock)
        else:
            torn_by_run[record.run_id] = torn
    accounts: list[AccountCheck] = []
    if checking:
        scopes: list[tuple[str, str | None]]
        if run_id is not None:
            scopes = [(r.label_prefix, run_id) for r in mine[:1]]
        else:
            prefixes = {r.label_prefix for r in mine} | ({label_prefix} if label_prefix else set())
            scopes = [(p, None) for p in sorted(prefixes)]
        for prefix, scope in scopes:
            failed = {ref.provider_id for ref in unconfirmed if ref.provider_id}
            try:
                check = await check_account(
                    provider, store, noting, settings,
                    label_prefix=prefix, owner_tag=settings.install_tag(store.state_dir),
                    run_id=scope, failed=failed, end_strangers=end_strangers,
                    remember_in=[r.run_id for r in mine], clock=clock,
                )
            except Exception as exc:  # a check that breaks must not undo confirmed deletes
                why = f"the account check failed: {type(exc).__name__}: {exc}"
                check = AccountCheck(provider.info.name, False, scope, prefix, error=why)
            if check is not None:
                accounts.append(check)
                # Found on the account and ended there: leases of their runs all the same.
                confirmed += [LeaseRef(h.run_id, h.provider_id, h.label) for h in check.destroyed]
                unconfirmed += [
                    LeaseRef(h.run_id, h.provider_id, h.label, h.reason)
                    for h in check.unconfirmed
                    if h.provider_id not in failed  # named already
                ]
        unconfirmed += _still_unclear(store, mine)
        for record in mine:  # as the check left them: unclear creates resolved or dropped
            with contextlib.suppress(RecordError):
                record = store.load(record.run_id)
            torn = torn_by_run.get(record.run_id, set())
            await _release_rest(provider, store, record, torn, noting, settings, clock)
    return DownReport(
        tuple(confirmed),
        tuple(unconfirmed),
        tuple(skipped),
        tuple(errors),
        tuple(secrets_left),
        tuple(accounts),
    )


async def _release_rest(
    provider: Provider,
    store: RecordStore,
    record: RunRecord,
    torn: set[str],
    sink: EventSink,
    settings: WalkSettings,
    clock: Clock,
) -> None:
    """Secrets whose instances went earlier or never existed (torn ones went with them)."""
    rest = {s.label for s in record.secrets} - torn
    await attempt_secrets.release(provider, store, record, sink, settings, labels=rest, clock=clock)


_UNCLEAR = "an unclear create that could not be looked up: the provider did not answer"


async def _teardown_one(
    provider: Provider,
    store: RecordStore,
    record: RunRecord,
    lease: LeaseRecord,
    sink: EventSink,
    settings: WalkSettings,
    clock: Clock,
) -> bool:
    try:
        return await teardown_lease(
            provider, store, record, lease, sink, settings,
            reason=DeleteReason.REQUESTED, clock=clock,
        )
    except OSError as exc:
        # The record could not be written; the provider's answer still stands (a later
        # `down` or restart check corrects a stale record).
        lease.detail = f"{lease.detail}; the record could not be written: {exc}"
        return lease.state is LeaseRecordState.DELETED
    except Exception as exc:  # never lose the rest of the leases to one failure
        lease.detail = f"teardown failed: {type(exc).__name__}: {exc}"
        return False


def _still_unclear(store: RecordStore, records: list[RunRecord]) -> list[LeaseRef]:
    """Unclear creates the account check could not resolve (its listing failed): each may
    bill, named by its label."""
    left: list[LeaseRef] = []
    for earlier in records:
        try:
            record = store.load(earlier.run_id)  # the check may have resolved or dropped some
        except RecordError:
            record = earlier
        left += [
            LeaseRef(record.run_id, None, x.label, _UNCLEAR)
            for x in record.open_leases()
            if x.provider_id is None
        ]
    return left


def _with_reason(ref: LeaseRef, reason: str) -> LeaseRef:
    return LeaseRef(ref.run_id, ref.provider_id, ref.label, reason)
