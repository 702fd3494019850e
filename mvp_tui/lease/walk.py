"""The lease walk: from an ordered list of offers to one running lease with an SSH endpoint.

Each offer is tried once, in order. Before every create call the attempt is recorded (with a
placeholder lease under the attempt's label), and every answer is recorded before anything
else happens, so a crash at any point leaves a record that finds what may bill:

- CREATED → wait until RUNNING with an SSH endpoint; dead, or not running in time → destroy
  (confirmed) and try the next offer.
- AMBIGUOUS (or the call raised) → look for the attempt's label after each reconcile wait:
  adopt it, destroy duplicates; not found → retry the offer (at most
  `max_ambiguous_per_offer` unclear creates per offer), then move on.
- UNAVAILABLE / FORBIDDEN → next offer. REJECTED / NO_CREDITS / AUTH_FAILED → stop.
- A walk with any unclear create ends with a sweep of the node's labels: strays destroyed;
  so does every walk that gives a lease (seed 003: once ready, the node's other pods go).
- After the last offer, a provider that can (RunPod) is asked for the types it still gives
  that were not tried: the walk covers every type, not only the offers it was handed.
- Cancelled (Ctrl-C) → what this walk leased is destroyed, then the cancellation goes on.

A lease whose delete cannot be confirmed stops the walk: no new lease is made while one may
still bill.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from copy import copy
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.labels import attempt_label
from mvp_tui.lease import attempt_secrets, walk_texts
from mvp_tui.lease.events import (
    AttemptAnswered,
    AttemptStarted,
    DeleteReason,
    LeaseDeleted,
    LeaseDeleteUnconfirmed,
    LeaseNotReady,
    LeasePending,
    LeaseRunning,
    OfferPicked,
    OfferSkipped,
    PrefetchStarted,
    Reconciled,
    ReconcileStarted,
    WalkFailed,
    WalkFailure,
    WalkReordered,
)
from mvp_tui.lease.naming import check_run_id, new_run_id
from mvp_tui.lease.reconcile import find_by_label, sweep, track
from mvp_tui.lease.records import (
    AttemptRecord,
    CreateAttemptOutcome,
    LeaseRecord,
    LeaseRecordState,
    RecordError,
    RecordStore,
    RunRecord,
    SecretRecord,
)
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.spend import lease_spend_usd, lease_uptime_s
from mvp_tui.lease.teardown import Clock, delete_confirmed, teardown_lease
from mvp_tui.node_protocol import PREFETCH_ENV
from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    LeaseState,
    LeaseStatus,
    Offer,
    Outcome,
    Provider,
    ProviderError,
    SecretOutcome,
    SshEndpoint,
    StartChecker,
)
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

_DETAIL_CHARS = 500
_STOPS = {
    Outcome.REJECTED: WalkFailure.REJECTED,
    Outcome.NO_CREDITS: WalkFailure.NO_CREDITS,
    Outcome.AUTH_FAILED: WalkFailure.AUTH_FAILED,
}
_NEVER_READY = (LeaseState.DEAD, LeaseState.STOPPED, LeaseState.GONE)


@dataclass(frozen=True, slots=True)
class WalkResult:
    """A running lease, or why there is none; with every attempt of the walk."""

    run_id: str
    lease: LeaseRecord | None
    failure: WalkFailure | None
    reason: str
    attempts: tuple[AttemptRecord, ...]
    may_bill: tuple[str, ...]  # labels of leases (besides the running one) not confirmed gone

    @property
    def ok(self) -> bool:
        return self.lease is not None

    @property
    def endpoint(self) -> SshEndpoint | None:
        return self.lease.ssh if self.lease else None


@dataclass(frozen=True, slots=True)
class _Abandon:
    """A lease that will not come up, for a reason no other offer would fix: it is
    destroyed and the walk stops with `reason` and `fix`."""

    reason: str
    fix: str


class _Stop(Exception):
    """Ends the walk with a failure (internal control flow)."""

    def __init__(self, failure: WalkFailure, reason: str) -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason


class LeaseWalk:
    """One node's walk over the offers; owns the run record while `run` is running."""

    def __init__(
        self,
        provider: Provider,
        store: RecordStore,
        sink: EventSink,
        settings: WalkSettings,
        clock: Clock = time.time,
        *,
        run_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        redact: Redactor | None = None,
    ) -> None:
        self.provider = provider
        self.store = store
        self.sink = sink
        self.settings = settings
        self.clock = clock
        self.run_id = check_run_id(run_id) if run_id else new_run_id()
        self._config = dict(config or {})
        self._redact = redact or Redactor()
        self._record: RunRecord | None = None
        self._first_attempt = 0
        self._misses: list[str] = []  # why each tried offer gave nothing, for the failure text
        self._not_ready: list[str] = []  # why each created lease never became ready
        self._unplaceable: str | None = None  # the last capacity / 403 answer's detail

    # ---- the walk, top to bottom -------------------------------------------------------------

    async def run(self, offers: Sequence[Offer]) -> WalkResult:
        """Walk `offers` in order until one gives a running lease.

        Every failure after the record exists comes back as a `WalkResult`; only a record
        that cannot be opened (RecordError/OSError, before any create) raises. Cancelling
        destroys what this walk leased, then re-raises CancelledError.
        """
        record = self._open_record()
        self._first_attempt = len(record.attempts)
        try:
            try:
                lease = await self._walk(offers)
            except _Stop as stop:
                await self._sweep_if_unclear(keep=None)
                await self._release_secrets()
                return self._failed(stop.failure, stop.reason + self._unclear_note(stop))
            # Seed 003: once a lease is ready, the node's other instances always go (a late
            # one of an unclear create, one a crashed run left under this run's labels).
            await self._sweep(keep=lease.provider_id, quiet_when_clean=not self._unclear_attempts())
            await self._release_secrets()
            return self._result(lease, None, "")
        except OSError as exc:
            await self._abandon_unrecorded()
            path = self.store.record_path(self.run_id)
            return self._failed(
                WalkFailure.RECORD_FAILED,
                f"cannot write the run record {path} ({exc.strerror or exc}); "
                "free disk space or fix the state directory's permissions",
            )
        except asyncio.CancelledError:
            await self._cleanup_cancelled()
            raise

    async def _walk(self, offers: Sequence[Offer]) -> LeaseRecord:
        unique = list({(o.provider, o.offer_id): o for o in offers}.values())
        if not unique:
            raise _Stop(WalkFailure.NO_OFFERS, "no offers to try: widen the selection policy")
        queue, tried = list(unique), list[Offer]()
        while queue:
            offer = queue.pop(0)
            tried.append(offer)
            if self._skipped(offer):
                continue
            self._emit(
                OfferPicked(
                    run_id=self.run_id,
                    offer_id=offer.offer_id,
                    gpu_name=offer.gpu_name,
                    price_per_hour=offer.price_per_hour,
                    position=len(tried),
                    of=len(tried) + len(queue),
                )
            )
            lease = await self._try_offer(offer)
            if lease is not None:
                return lease
            queue = await self._reorder(queue, tried)
        raise self._exhausted()

    async def _reorder(self, queue: list[Offer], tried: list[Offer]) -> list[Offer]:
        """After an offer proved unplaceable, a provider that can (RunPod: `reorder_offers`
        reads its catalog again) sorts the offers left; an offer is never tried twice."""
        attempts = self._rec.attempts[self._first_attempt :]
        unplaceable = (CreateAttemptOutcome.UNAVAILABLE, CreateAttemptOutcome.FORBIDDEN)
        # An empty queue asks too: the types the catalog still gives that were not tried
        # (seed 003's walk covers every type, not only the offers first handed over).
        placed = bool(attempts) and attempts[-1].outcome not in unplaceable
        if not attempts or (queue and placed):
            return queue
        done = {(o.provider, o.offer_id) for o in tried}
        try:
            fresh = await self.provider.reorder_offers(list(queue), list(tried))
        except ProviderError as exc:
            if not queue:
                return queue  # at the end: nothing left whose order could be kept
            why = self._clean(str(exc), 200)
            self._say_order(
                queue, f"the catalog could not be read again ({why}): the offers left keep "
                "their order"
            )
            return queue
        if fresh is None:  # this provider keeps the order it gave
            return queue
        left = [o for o in dict.fromkeys(fresh) if (o.provider, o.offer_id) not in done]
        if not queue and not left:
            return left  # nothing more to say: the walk ends with what it tried
        failed = self.provider.last_reorder_error  # it kept the order
        if failed:
            reason = f"the catalog could not be read again ({failed}): the offers left keep "
            self._say_order(left, reason + "their order")
        else:
            self._say_order(left, "re-sorted from the catalog read again")
        return left

    def _say_order(self, offers: Sequence[Offer], reason: str) -> None:
        names = tuple(f"{o.provider}:{o.offer_id}" for o in offers)
        self._emit(WalkReordered(run_id=self.run_id, offers=names, reason=reason))

    async def _try_offer(self, offer: Offer) -> LeaseRecord | None:
        """Create on `offer` (again after unclear answers) and settle; None → next offer."""
        unclear = 0
        while True:
            attempt, placeholder, secret = self._begin_attempt(offer)
            if secret is not None:
                await self._store_secret(attempt, placeholder, secret)
            result = await self._create(offer, attempt)
            self._record_answer(attempt, placeholder, result)
            # A clear refusal leaves no instance: its secret goes now (an unclear one waits).
            await self._release_secrets({attempt.label}, name_unknown=False)
            if result.outcome is Outcome.CREATED and result.provider_id:
                return await self._settle(placeholder)
            if result.provider_id:
                # Refused, yet an instance exists (e.g. created stopped): it must not bill.
                await self._destroy_or_stop(placeholder, DeleteReason.UNWANTED)
                self._misses.append(self._miss(offer, result))
                if result.outcome in _STOPS:
                    raise _Stop(_STOPS[result.outcome], self._stop_reason(offer, result))
                return None
            if result.outcome in _STOPS:
                raise _Stop(_STOPS[result.outcome], self._stop_reason(offer, result))
            if result.outcome in (Outcome.UNAVAILABLE, Outcome.FORBIDDEN):
                self._misses.append(self._miss(offer, result))
                self._unplaceable = self._clean(result.detail, 200) or result.outcome.value
                return None
            # AMBIGUOUS, an error, or CREATED without an id: look for it by its label.
            found = await self._reconcile(attempt)
            if found is not None:
                return await self._settle(found)
            unclear += 1
            if unclear >= self.settings.max_ambiguous_per_offer:
                self._misses.append(
                    f"offer {offer.offer_id}: {unclear} creates without a clear answer"
                )
                return None

    # ---- create and its answer ---------------------------------------------------------------

    def _begin_attempt(
        self, offer: Offer
    ) -> tuple[AttemptRecord, LeaseRecord, SecretRecord | None]:
        """Record the attempt, a placeholder lease under its label and the name of the
        secret that will hold its host key (RunPod), in one save before any call."""
        record = self._rec
        number = 1 + sum(1 for a in record.attempts if a.node_id == self.settings.node_id)
        label = attempt_label(
            self.settings.label_prefix, record.owner_tag, self.run_id, self.settings.node_id,
            number,
        )
        now = self.clock()
        attempt = AttemptRecord(
            label=label,
            node_id=self.settings.node_id,
            number=number,
            offer_id=offer.offer_id,
            gpu_name=offer.gpu_name,
            price_per_hour=offer.price_per_hour,
            started_at=now,
        )
        # A provider that hands the node its host key (RunPod) names it now: it is pinned in
        # the record before the create is sent, so the first connect is already strict.
        placeholder = LeaseRecord(
            provider=self.provider.info.name,
            label=label,
            node_id=self.settings.node_id,
            offer_id=offer.offer_id,
            gpu_name=offer.gpu_name,
            price_per_hour=offer.price_per_hour,
            state=LeaseRecordState.CREATING,
            host_key=self.provider.host_key_for(label),
        )
        record.attempts.append(attempt)
        record.leases.append(placeholder)
        secret = attempt_secrets.begin(self.provider, record, label)
        self.store.save(record)
        self._emit(
            AttemptStarted(
                run_id=self.run_id,
                label=label,
                offer_id=offer.offer_id,
                gpu_name=offer.gpu_name,
                price_per_hour=offer.price_per_hour,
                attempt=number,
            )
        )
        return attempt, placeholder, secret

    async def _store_secret(
        self, attempt: AttemptRecord, placeholder: LeaseRecord, secret: SecretRecord
    ) -> None:
        """Store the attempt's secret and save its id before the create is sent. Without it
        the pod could not get its pinned host key: no create is sent and the walk stops
        (a failing secrets API would fail every offer alike)."""
        answer = await attempt_secrets.store(
            self.provider, self.store, self._rec, secret, self.sink, self.clock
        )
        if answer.outcome is SecretOutcome.STORED:
            return
        auth = answer.http_status == 401
        what = "no clear answer" if answer.outcome is SecretOutcome.UNCLEAR else "refused"
        detail = self._clean(answer.detail, 300)
        reason = (
            f"storing the host key secret {secret.name} for {attempt.label}: {what} ({detail}); "
            "no create was sent"
        )
        refused = CreateResult(
            Outcome.AUTH_FAILED if auth else Outcome.REJECTED, None, reason, answer.http_status
        )
        self._record_answer(attempt, placeholder, refused)  # an unclear one is named later
        fix = (
            "check the provider's api_key"
            if auth
            else "retry in a minute; the account's secrets must be writable with this key"
        )
        failure = WalkFailure.AUTH_FAILED if auth else WalkFailure.PROVIDER_ERROR
        raise _Stop(failure, f"{reason} — {fix}")

    async def _release_secrets(
        self, labels: set[str] | None = None, *, name_unknown: bool = True
    ) -> None:
        """Delete the secrets of this walk's attempts (of `labels`) whose instance is gone."""
        if labels is None:
            node = self.settings.node_id
            mine = self._rec.attempts[self._first_attempt :]
            labels = {a.label for a in mine if a.node_id == node}
        await attempt_secrets.release(
            self.provider, self.store, self._rec, self.sink, self.settings,
            labels=labels, name_unknown=name_unknown, clock=self.clock,
        )

    async def _create(self, offer: Offer, attempt: AttemptRecord) -> CreateResult:
        s = self.settings
        request = CreateRequest(
            label=attempt.label,
            image=s.image,
            env=dict(s.env),
            disk_gb=s.disk_gb,
            onstart=s.onstart,
            ssh_public_key=s.ssh_public_key,
        )
        try:
            return await self.provider.create(offer, request)
        except ProviderError as exc:
            # The call may have reached the provider: treat it as unclear.
            attempt.outcome = CreateAttemptOutcome.ERROR
            return CreateResult(Outcome.AMBIGUOUS, None, str(exc), exc.http_status)

    def _record_answer(
        self, attempt: AttemptRecord, placeholder: LeaseRecord, result: CreateResult
    ) -> None:
        """Write the answer to the record, then tell the UI (in that order: a crash right
        after the event still finds the lease)."""
        record = self._rec
        raised = attempt.outcome is CreateAttemptOutcome.ERROR
        attempt.answered_at = self.clock()
        attempt.http_status = result.http_status
        attempt.detail = self._clean(result.detail)
        attempt.provider_id = result.provider_id
        if not raised:
            attempt.outcome = CreateAttemptOutcome(result.outcome.value)
        if result.provider_id:
            placeholder.provider_id = result.provider_id
            placeholder.state = LeaseRecordState.PENDING
            placeholder.created_at = attempt.answered_at
        elif result.outcome is Outcome.AMBIGUOUS or result.outcome is Outcome.CREATED:
            placeholder.state = LeaseRecordState.UNKNOWN
            placeholder.detail = "no clear answer to the create call"
        else:
            record.leases.remove(placeholder)  # a clear refusal: nothing exists
        self.store.save(record)
        self._emit(
            AttemptAnswered(
                run_id=self.run_id,
                label=attempt.label,
                offer_id=attempt.offer_id,
                outcome="error" if raised else result.outcome.value,
                http_status=result.http_status,
                detail=attempt.detail,
                provider_id=result.provider_id,
                created_at=placeholder.created_at if result.provider_id else None,
            )
        )

    # ---- unclear answers ---------------------------------------------------------------------

    async def _reconcile(self, attempt: AttemptRecord) -> LeaseRecord | None:
        """Look for the attempt's instance by label; adopt it, destroy duplicates."""
        s = self.settings
        record = self._rec
        self._emit(
            ReconcileStarted(run_id=self.run_id, label=attempt.label, waits_s=s.reconcile_waits_s)
        )
        try:
            found = await find_by_label(
                self.provider, record, attempt.label, s.node_id, s.reconcile_waits_s, s.sleep
            )
        except ProviderError as exc:
            raise _Stop(
                WalkFailure.PROVIDER_ERROR,
                f"cannot look for the instance of the unclear create {attempt.label}: "
                f"{self._clean(str(exc))}",
            ) from None
        adopted: LeaseRecord | None = None
        destroyed: list[str] = []
        unconfirmed: list[str] = []
        if found.adopted is not None:
            adopted = track(record, found.adopted, self.clock())
            attempt.outcome = CreateAttemptOutcome.ADOPTED
            attempt.provider_id = found.adopted.provider_id
            duplicates = [track(record, other, self.clock()) for other in found.others]
            self.store.save(record)
            for duplicate in duplicates:
                ok = await teardown_lease(
                    self.provider,
                    self.store,
                    record,
                    duplicate,
                    self.sink,
                    s,
                    reason=DeleteReason.DUPLICATE,
                    clock=self.clock,
                )
                (destroyed if ok else unconfirmed).append(duplicate.provider_id or "")
        else:
            attempt.outcome = CreateAttemptOutcome.AMBIGUOUS
            self.store.save(record)
        self._emit(
            Reconciled(
                run_id=self.run_id,
                label=attempt.label,
                adopted_id=adopted.provider_id if adopted else None,
                destroyed=tuple(destroyed),
                unconfirmed=tuple(unconfirmed),
                created_at=adopted.created_at if adopted else None,
            )
        )
        return adopted

    # ---- waiting for running -----------------------------------------------------------------

    async def _settle(self, lease: LeaseRecord) -> LeaseRecord | None:
        """Wait until the lease runs with an SSH endpoint; else destroy it (None → next).
        An end no other offer would fix (`_Abandon`) destroys it and stops the walk."""
        status = await self._wait_running(lease)
        if isinstance(status, LeaseStatus):
            return self._mark_running(lease, status)
        if isinstance(status, _Abandon):
            await self._abandon(lease, status)
        reason = status
        lease.detail = f"not ready: {reason}"
        self._emit(
            LeaseNotReady(run_id=self.run_id, provider_id=lease.provider_id or "", reason=reason)
        )
        self._misses.append(
            f"lease {lease.provider_id} on offer {lease.offer_id} not ready: {reason}"
        )
        self._not_ready.append(reason)
        await self._destroy_or_stop(lease, DeleteReason.NOT_READY)
        return None

    async def _abandon(self, lease: LeaseRecord, end: _Abandon) -> NoReturn:
        """Destroy the lease (best effort: confirmed if the API lets it be) and stop the
        walk with `end`'s cause; an unconfirmed delete adds that it may still bill."""
        lease.detail = f"abandoned: {end.reason}"
        self._emit(
            LeaseNotReady(run_id=self.run_id, provider_id=lease.provider_id or "",
                          reason=end.reason)
        )
        try:
            await self._destroy_or_stop(lease, DeleteReason.NOT_READY)
        except _Stop as stop:
            raise _Stop(stop.failure, f"{end.reason} — {end.fix}; {stop.reason}") from None
        raise _Stop(WalkFailure.PROVIDER_ERROR, f"{end.reason} — {end.fix}")

    def _read_failed(self, provider_id: str, failures: int, last_error: str) -> _Abandon:
        reason, fix = walk_texts.api_failing(
            self.provider.info.name, provider_id, failures, last_error
        )
        return _Abandon(reason, fix)

    async def _check_start(self, provider_id: str) -> _Abandon | bool | None:
        """The instance's log on its start command (`StartChecker`): an end when the image's
        own entrypoint ran instead, True when the command ran, None when it cannot tell."""
        if not isinstance(self.provider, StartChecker):
            return True
        check = await self.provider.start_check(provider_id)
        if check.ran is False:
            return _Abandon(self._clean(check.problem), self._clean(check.fix))
        return check.ran

    async def _wait_running(self, lease: LeaseRecord) -> LeaseStatus | str | _Abandon:
        """The RUNNING status with an SSH endpoint, or why the lease will not get there
        (`_Abandon`: why no other offer would do better either)."""
        s = self.settings
        provider_id = lease.provider_id or ""
        started = s.monotonic()
        last_raw: str | None = None
        last_error = ""
        failures = 0  # reads failed in a row
        next_check: float | None = None  # when the log is read next (once the container runs)
        often_until = 0.0  # the end of RUNNING's first minute, when reads come more often
        start_known = False  # the log said the start command ran
        while True:
            try:
                status = await self.provider.get(provider_id)
            except ProviderError as exc:  # transient, unless it goes on
                last_error = self._clean(str(exc))
                failures += 1
                if failures >= s.read_failure_limit:
                    return self._read_failed(provider_id, failures, last_error)
            else:
                failures = 0
                now = s.monotonic()
                if status.container_up and next_check is None:
                    next_check, often_until = now + s.start_check_every_s, now + s.start_check_s
                due = next_check is not None and next_check <= now
                if due and not start_known and not status.ssh:
                    # Then once a start_check_s: RunPod says RUNNING while the image may
                    # still be pulling, so its entrypoint may speak later (runpod.md §0.4).
                    later = now >= often_until
                    next_check = now + (s.start_check_s if later else s.start_check_every_s)
                    verdict = await self._check_start(provider_id)
                    if isinstance(verdict, _Abandon):
                        return verdict
                    start_known = verdict is True
                # A node reached without SSH (a local child process) is ready when it runs.
                needs_ssh = self.provider.info.ssh
                if status.state is LeaseState.RUNNING and (status.ssh or not needs_ssh):
                    return status
                if status.state in _NEVER_READY:
                    detail = self._clean(status.detail)
                    raw = self._clean(status.raw_state) or status.state.value
                    return f"the instance is {raw}" + (f": {detail}" if detail else "")
                raw = self._clean(status.raw_state) or status.state.value
                priced = self._take_price(lease, status)
                if raw != last_raw or priced:
                    last_raw = raw
                    self._emit(
                        LeasePending(
                            run_id=self.run_id,
                            provider_id=provider_id,
                            raw_state=raw,
                            waited_s=round(s.monotonic() - started, 3),
                            price_per_hour=status.price_per_hour,
                        )
                    )
            if s.monotonic() - started >= s.ready_timeout_s:
                last = last_raw or "never answered"
                why = f"; last error: {last_error}" if last_error else ""
                return (
                    f"not running with an SSH endpoint after {s.ready_timeout_s:g} s "
                    f"(last state: {last}{why})"
                )
            await s.sleep(s.poll_interval_s)

    def _take_price(self, lease: LeaseRecord, status: LeaseStatus) -> bool:
        """The instance's own $/h in place of the offer's, once it reports one (Vast's row
        `dph_total` prices the disk the create rented); whether it changed the record."""
        price = status.price_per_hour
        if not price or price == lease.price_per_hour:
            return False
        lease.price_per_hour = price
        self.store.save(self._rec)
        return True

    def _mark_running(self, lease: LeaseRecord, status: LeaseStatus) -> LeaseRecord:
        ssh = status.ssh
        now = self.clock()
        lease.state = LeaseRecordState.RUNNING
        lease.running_at = now
        lease.ssh = status.ssh
        if status.price_per_hour:
            lease.price_per_hour = status.price_per_hour
        lease.detail = "running"
        self.store.save(self._rec)
        self._emit(
            LeaseRunning(
                run_id=self.run_id,
                provider_id=lease.provider_id or "",
                label=lease.label,
                host=ssh.host if ssh else "",
                port=ssh.port if ssh else 0,
                user=ssh.user if ssh else "",
                via=ssh.via if ssh else "none",
                after_s=round(now - (lease.created_at or now), 3),
                price_per_hour=lease.price_per_hour,
                created_at=lease.created_at,
            )
        )
        if self.settings.env.get(PREFETCH_ENV) == "1":  # its start command fetches the model
            self._emit(PrefetchStarted(run_id=self.run_id, provider_id=lease.provider_id or ""))
        return lease

    # ---- endings -----------------------------------------------------------------------------

    async def _destroy_or_stop(self, lease: LeaseRecord, reason: DeleteReason) -> None:
        ok = await teardown_lease(
            self.provider,
            self.store,
            self._rec,
            lease,
            self.sink,
            self.settings,
            reason=reason,
            clock=self.clock,
        )
        if not ok:
            raise _Stop(
                WalkFailure.DELETE_UNCONFIRMED,
                f"lease {lease.provider_id} ({lease.label}) could not be confirmed deleted and "
                "may still bill; no other lease is made. Retry with `mvp-tui down "
                f"{self.run_id}` or check the provider's console",
            )

    async def _sweep_if_unclear(self, keep: str | None) -> None:
        """After any unclear create, destroy every other instance of this node."""
        if self._unclear_attempts():
            await self._sweep(keep)

    async def _sweep(self, keep: str | None, *, quiet_when_clean: bool = False) -> None:
        await sweep(
            self.provider,
            self.store,
            self._rec,
            self.sink,
            self.settings,
            node_id=self.settings.node_id,
            keep=keep,
            clock=self.clock,
            quiet_when_clean=quiet_when_clean,
        )

    async def _cleanup_cancelled(self) -> None:
        """Ctrl-C: destroy what this walk leased (confirmed), then sweep after unclear creates."""
        record = self._rec
        for lease in record.open_leases():
            if lease.provider_id and lease.node_id == self.settings.node_id:
                await teardown_lease(
                    self.provider,
                    self.store,
                    record,
                    lease,
                    self.sink,
                    self.settings,
                    reason=DeleteReason.INTERRUPTED,
                    clock=self.clock,
                )
        if self._unclear_attempts() or any(x.provider_id is None for x in record.open_leases()):
            await sweep(
                self.provider,
                self.store,
                record,
                self.sink,
                self.settings,
                node_id=self.settings.node_id,
                reason=DeleteReason.INTERRUPTED,
                clock=self.clock,
                forget_unlisted=False,
            )
        await self._release_secrets()

    async def _abandon_unrecorded(self) -> None:
        """The record cannot be written: destroy what we know of, since nothing else will."""
        record = self._rec
        for lease in record.open_leases():
            if not lease.provider_id:
                continue
            check = await delete_confirmed(self.provider, lease.provider_id, self.settings)
            now = self.clock()
            if check.confirmed:
                lease.state, lease.deleted_at = LeaseRecordState.DELETED, now
                self._emit(
                    LeaseDeleted(
                        run_id=self.run_id,
                        provider_id=lease.provider_id,
                        uptime_s=round(lease_uptime_s(lease, now), 3),
                        spend_usd=round(lease_spend_usd(lease, now), 6),
                    )
                )
            else:
                self._emit(
                    LeaseDeleteUnconfirmed(
                        run_id=self.run_id, provider_id=lease.provider_id, reason=check.reason
                    )
                )
        # A placeholder still CREATING sent no create: its secret has no pod to wait for.
        await attempt_secrets.release(
            self.provider, self.store, record, self.sink, self.settings,
            blocking=attempt_secrets.sent_creates, clock=self.clock,
        )

    def _failed(self, failure: WalkFailure, reason: str) -> WalkResult:
        reason = self._clean(reason, 2000)
        attempts = len(self._rec.attempts) - self._first_attempt
        self._emit(
            WalkFailed(run_id=self.run_id, failure=failure, reason=reason, attempts=attempts)
        )
        return self._result(None, failure, reason)

    def _result(
        self, lease: LeaseRecord | None, failure: WalkFailure | None, reason: str
    ) -> WalkResult:
        record = self._rec
        return WalkResult(
            run_id=self.run_id,
            lease=copy(lease) if lease else None,
            failure=failure,
            reason=reason,
            attempts=tuple(copy(a) for a in record.attempts[self._first_attempt :]),
            may_bill=tuple(x.label for x in record.open_leases() if x is not lease),
        )

    def _exhausted(self) -> _Stop:
        attempts = self._rec.attempts[self._first_attempt :]
        if attempts and all(
            a.outcome in (CreateAttemptOutcome.AMBIGUOUS, CreateAttemptOutcome.ERROR)
            for a in attempts
        ):
            return _Stop(
                WalkFailure.UNANSWERED,
                f"no create call got a clear answer ({len(attempts)} tried); an instance may "
                f"still appear: check `mvp-tui ls` / the provider's console",
            )
        text = walk_texts.no_capacity(
            self.provider.info.name, self._not_ready, self._unplaceable, self._misses
        )
        return _Stop(WalkFailure.EXHAUSTED, text)

    def _unclear_note(self, stop: _Stop) -> str:
        """The seed's warning after a failed walk with unclear creates (an UNANSWERED walk
        already says it)."""
        unclear = (CreateAttemptOutcome.AMBIGUOUS, CreateAttemptOutcome.ERROR)
        mine = self._rec.attempts[self._first_attempt :]
        labels = [a.label for a in mine if a.outcome in unclear]
        if not labels or stop.failure is WalkFailure.UNANSWERED:
            return ""
        return "; " + walk_texts.unclear_warning(self.provider.info.name, labels)

    # ---- small helpers -----------------------------------------------------------------------

    @property
    def _rec(self) -> RunRecord:
        if self._record is None:
            raise RuntimeError("the walk has no run record: call run() first")
        return self._record

    def _open_record(self) -> RunRecord:
        """Load the run's record when the engine created it, else create it."""
        try:
            self._record = self.store.load(self.run_id)
        except RecordError:
            if self.store.record_path(self.run_id).exists():
                raise
            self._record = self.store.create_run(
                self.run_id,
                provider=self.provider.info.name,
                label_prefix=self.settings.label_prefix,
                created_at=self.clock(),
                owner_tag=self.settings.install_tag(self.store.state_dir),
                config=self._config,
            )
        if self._record.label_prefix != self.settings.label_prefix:
            raise RecordError(
                self.store.record_path(self.run_id),
                f"the run uses label prefix {self._record.label_prefix!r}, not "
                f"{self.settings.label_prefix!r}",
                "keep label_prefix unchanged for a run",
            )
        return self._record

    def _skipped(self, offer: Offer) -> bool:
        """Whether the walk passes `offer` by, said and kept among the misses: over the
        price cap, or marked never to rent by its provider (`Offer.refused`: a host that
        cannot start the image or hold the disk), whoever picked it."""
        cap = self.settings.max_price_per_hour
        if cap is not None and offer.price_per_hour > cap:
            reason = f"{offer.price_per_hour:.4f} USD/h is over max_price_per_hour {cap:.4f}"
        elif offer.refused:
            reason = self._clean(offer.refused, 200)
        else:
            return False
        self._emit(
            OfferSkipped(
                run_id=self.run_id,
                offer_id=offer.offer_id,
                price_per_hour=offer.price_per_hour,
                reason=reason,
            )
        )
        self._misses.append(f"offer {offer.offer_id} skipped: {reason}")
        return True

    def _unclear_attempts(self) -> bool:
        unclear = (
            CreateAttemptOutcome.AMBIGUOUS,
            CreateAttemptOutcome.ERROR,
            CreateAttemptOutcome.ADOPTED,
        )
        return any(a.outcome in unclear for a in self._rec.attempts[self._first_attempt :])

    def _miss(self, offer: Offer, result: CreateResult) -> str:
        detail = self._clean(result.detail, 200)
        return f"offer {offer.offer_id} {result.outcome.value}" + (f" ({detail})" if detail else "")

    def _stop_reason(self, offer: Offer, result: CreateResult) -> str:
        fixes = {
            Outcome.REJECTED: "the request itself was refused; check image, disk_gb and env",
            Outcome.NO_CREDITS: "the account has no credit left; add credit, then retry",
            Outcome.AUTH_FAILED: "the API key was refused; check the provider's api_key",
        }
        detail = self._clean(result.detail, 300)
        status = f" (HTTP {result.http_status})" if result.http_status else ""
        return (
            f"offer {offer.offer_id}: {result.outcome.value}{status}"
            + (f": {detail}" if detail else "")
            + f" — {fixes.get(result.outcome, '')}"
        )

    def _clean(self, text: str, limit: int = _DETAIL_CHARS) -> str:
        """Provider text for events and records: redacted, then cut (a secret cut at the
        limit would otherwise keep its prefix)."""
        return clean_line(text, limit, redact=self._redact)

    def _emit(self, event: EngineEvent) -> None:
        self.sink(replace(event, at=self.clock()))
