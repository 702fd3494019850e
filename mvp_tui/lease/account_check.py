"""Provable zero: after a teardown, ask the provider what still carries our label prefix.

A confirmed delete proves one id gone; it says nothing of an instance the record never knew
(a create answered after the walk was cancelled, a low bid that left a stopped instance, an
outbid bid Vast paused). So every teardown ends by listing the account under the prefix, in
every state the provider bills for (Vast: running, stopped, exited, paused bids; RunPod:
every pod status), destroying what is in scope, confirmed, and only then saying "nothing
bills". Only what is ours is ever destroyed (`ownership.py`: a lease a record here holds,
or an instance carrying this install's tag); whatever else is named like an mvp-tui run is
reported with the command that ends it, never touched. In scope: the run torn down (our
other runs are reported: `down RUN` ends them), or every run of ours (`down --all`). Labels
of another prefix never appear. Network volumes are kept on purpose and shown with their
monthly cost.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mvp_tui.events import EventSink
from mvp_tui.labels import check_prefix
from mvp_tui.lease.events import AccountChecked, DeleteReason
from mvp_tui.lease.ownership import Holdings, Stranger, Whose, claim, strangers_lines
from mvp_tui.lease.reconcile import drop_unlisted_placeholders, track
from mvp_tui.lease.records import LeaseRecordState, RecordError, RecordStore, RunRecord
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.teardown import Clock, delete_confirmed, is_gone, teardown_lease
from mvp_tui.lease.volumes import load_volumes
from mvp_tui.providers import registry
from mvp_tui.providers.base import KeptVolume, LeaseState, LeaseStatus, Provider, ProviderError
from mvp_tui.untrusted import clean_line

_TEXT = 200  # provider text kept per field


@dataclass(frozen=True, slots=True)
class Held:
    """One instance of ours the account listing showed."""

    provider_id: str
    label: str
    run_id: str
    state: str  # the provider's words: "stopped", "EXITED", "paused bid (stopped, outbid)"
    reason: str = ""  # for an unconfirmed one: why


@dataclass(frozen=True, slots=True)
class AccountCheck:
    """What the provider listed under our prefix after a teardown, and what was done."""

    provider: str
    listed: bool  # False: the provider could not be asked; `error` says why
    run_id: str | None = None  # the scope: one run, or None for every run of the prefix
    prefix: str = ""
    error: str = ""
    destroyed: tuple[Held, ...] = ()  # ours, found and destroyed, confirmed
    unconfirmed: tuple[Held, ...] = ()  # ours, still there: may bill
    other_runs: tuple[Held, ...] = ()  # ours, of other runs: reported, not touched
    strangers: tuple[Stranger, ...] = ()  # named like ours, not made here: reported only
    ended: tuple[Stranger, ...] = ()  # not made here, ended as asked (--include-foreign)
    kept: tuple[KeptVolume, ...] = ()
    volumes_error: str = ""  # the volumes could not be listed (they are kept either way)

    @property
    def may_bill(self) -> bool:
        """Something in scope was found and not destroyed (exit 3, named)."""
        return bool(self.unconfirmed)

    @property
    def nothing_bills(self) -> bool:
        """Proven with the provider: it listed, and nothing of ours (but kept volumes) is
        left. A failed listing proves nothing: a warning, not exit 3 by itself."""
        return self.listed and not self.unconfirmed and not self.other_runs

    def lines(self, *, unconfirmed: bool = True) -> list[str]:
        """The receipt's words for it, one fact a line (plain text, cleaned); without the
        line per unconfirmed instance when `unconfirmed` is False (said elsewhere)."""
        provider = _clean(self.provider, 16)
        noun = _noun(self.provider)
        scope = f"run {self.run_id}" if self.run_id else f"ours under prefix {self.prefix!r}"
        if not self.listed:
            lines = [
                f"warning: account not checked ({provider}): {_clean(self.error)}. Each delete "
                f"was confirmed by its id only; to check the account, run `mvp-tui down --all` "
                "later"
            ]
        else:
            head = (
                f"account checked ({provider}): "
                + (
                    f"nothing of {scope} remains"
                    if not self.unconfirmed
                    else f"{len(self.unconfirmed)} {_plural(noun, len(self.unconfirmed))} of "
                    f"{scope} still there, MAY STILL BILL"
                )
            )
            lines = [" · ".join([head, *_destroyed_words(self.destroyed, noun)])]
            lines += [
                f"{noun} {_clean(h.provider_id, 64)} ({_clean(h.label, 80)}, {_clean(h.state, 60)})"
                f" of run {h.run_id} NOT confirmed destroyed: it may still bill"
                + (f" ({_clean(h.reason)})" if h.reason else "")
                + f"; end it with `mvp-tui down {h.run_id}`"
                for h in (self.unconfirmed if unconfirmed else ())
            ]
            lines += [
                f"{noun} {_clean(h.provider_id, 64)} ({_clean(h.state, 60)}) of another run, "
                f"{h.run_id}, may still bill: left alone (another dashboard may own it); end "
                f"it with `mvp-tui down {h.run_id}`"
                for h in self.other_runs
            ]
            lines += strangers_lines(self.strangers)
            lines += [
                f"{_clean(x.provider, 16)} {_clean(x.provider_id, 64)} ({_clean(x.label, 80)}), "
                "not made here, destroyed as asked, confirmed"
                for x in self.ended
            ]
        lines += [
            f"volume {_clean(v.name, 80)} ({_clean(v.volume_id, 64)}) kept: "
            f"${v.usd_per_month:.2f}/month until "
            f"`mvp-tui volume delete {_clean(v.name, 80)}`"
            for v in self.kept
        ]
        if self.volumes_error:
            lines.append(
                f"warning: network volumes not listed ({provider}): "
                f"{_clean(self.volumes_error)}; see `mvp-tui volume list`"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """The outcome as the run record keeps it (a receipt rebuilt from the record)."""
        return {
            "provider": self.provider,
            "listed": self.listed,
            "run_id": self.run_id,
            "prefix": self.prefix,
            "error": self.error,
            "destroyed": [_held_json(h) for h in self.destroyed],
            "unconfirmed": [_held_json(h) for h in self.unconfirmed],
            "other_runs": [_held_json(h) for h in self.other_runs],
            "strangers": [s.to_json() for s in self.strangers],
            "ended": [s.to_json() for s in self.ended],
            "kept": [
                {"volume_id": v.volume_id, "name": v.name, "size_gb": v.size_gb,
                 "usd_per_month": v.usd_per_month}
                for v in self.kept
            ],
            "volumes_error": self.volumes_error,
        }

    @classmethod
    def from_json(cls, data: object) -> AccountCheck | None:
        """The recorded outcome, or None when the record holds none (or one unreadable)."""
        if not isinstance(data, Mapping):
            return None
        try:
            run_id = data.get("run_id")
            return cls(
                provider=str(data["provider"]),
                listed=bool(data["listed"]),
                run_id=str(run_id) if run_id is not None else None,
                prefix=str(data.get("prefix", "")),
                error=str(data.get("error", "")),
                destroyed=tuple(_held(h) for h in data.get("destroyed", [])),
                unconfirmed=tuple(_held(h) for h in data.get("unconfirmed", [])),
                other_runs=tuple(_held(h) for h in data.get("other_runs", [])),
                strangers=tuple(Stranger.from_json(h) for h in data.get("strangers", [])),
                ended=tuple(Stranger.from_json(h) for h in data.get("ended", [])),
                kept=tuple(
                    KeptVolume(str(v["volume_id"]), str(v["name"]), int(v["size_gb"]),
                               float(v["usd_per_month"]))
                    for v in data.get("kept", [])
                ),
                volumes_error=str(data.get("volumes_error", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _held_json(h: Held) -> dict[str, str]:
    return {"provider_id": h.provider_id, "label": h.label, "run_id": h.run_id,
            "state": h.state, "reason": h.reason}


def _held(data: Any) -> Held:
    return Held(str(data["provider_id"]), str(data["label"]), str(data["run_id"]),
                str(data["state"]), str(data.get("reason", "")))


def _clean(text: str, limit: int = _TEXT) -> str:
    return clean_line(text, limit).strip()


def _noun(provider: str) -> str:
    kind = registry.find(provider)
    return kind.lease_noun if kind is not None else "instance"


def _plural(noun: str, n: int) -> str:
    return noun if n == 1 else noun + "s"


def _destroyed_words(destroyed: Sequence[Held], noun: str) -> list[str]:
    """"1 stopped instance 8123 destroyed, confirmed", one phrase per state."""
    by_state: dict[str, list[str]] = {}
    for h in destroyed:
        by_state.setdefault(_clean(h.state, 60), []).append(_clean(h.provider_id, 64))
    return [
        f"{len(ids)} {state} {_plural(noun, len(ids))} {', '.join(ids)} destroyed, confirmed"
        for state, ids in by_state.items()
    ]


@dataclass(slots=True)
class _Outcome:
    destroyed: list[Held] = field(default_factory=list)
    unconfirmed: list[Held] = field(default_factory=list)
    other_runs: list[Held] = field(default_factory=list)
    strangers: list[Stranger] = field(default_factory=list)
    ended: list[Stranger] = field(default_factory=list)


async def check_account(
    provider: Provider,
    store: RecordStore,
    sink: EventSink,
    settings: WalkSettings,
    *,
    label_prefix: str,
    owner_tag: str,
    run_id: str | None,
    failed: Collection[str] = (),
    remember_in: Collection[str] = (),
    end_strangers: Collection[str] = (),
    clock: Clock = time.time,
) -> AccountCheck | None:
    """List the account under `label_prefix`; destroy, confirmed, what is in scope (run
    `run_id`, or every run when None), each entered in its run record first; report the
    rest and the kept volumes. Ids in `failed` (this teardown's destroys that were not
    confirmed) are not sent again: listed, they are unconfirmed. None for a provider that
    never bills (nothing to prove). Only ours is destroyed (`ownership.py`, with this
    install's `owner_tag`); the rest under the prefix is reported, but for the ids in
    `end_strangers`, which the person listed and confirmed (`--include-foreign`). The outcome
    is emitted
    (`AccountChecked`) and written to the records in scope (for every run: those it
    touched, `remember_in` — the runs this teardown ended — and those still open)."""
    if not provider.info.billing:
        return None
    name = provider.info.name
    prefix = check_prefix(label_prefix)
    try:
        listed = await _listed_until_agreed(provider, store, settings, prefix, run_id)
    except ProviderError as exc:
        check = AccountCheck(name, False, run_id, prefix, error=str(exc))
    else:
        tally = await _settle(
            provider, store, sink, settings, listed, prefix, owner_tag, run_id, set(failed),
            set(end_strangers), clock,
        )
        check = AccountCheck(
            name, True, run_id, prefix,
            destroyed=tuple(tally.destroyed),
            unconfirmed=tuple(tally.unconfirmed),
            other_runs=tuple(tally.other_runs),
            strangers=tuple(tally.strangers),
            ended=tuple(tally.ended),
        )
    check = await _with_volumes(provider, store, check)
    sink(
        AccountChecked(
            at=clock(),
            run_id=run_id or "",
            provider=name,
            prefix=prefix,
            listed=check.listed,
            destroyed=tuple(f"{h.provider_id}:{h.run_id}" for h in check.destroyed),
            unconfirmed=tuple(f"{h.provider_id}:{h.run_id}" for h in check.unconfirmed),
            other_runs=tuple(f"{h.provider_id}:{h.run_id}" for h in check.other_runs),
            strangers=tuple(f"{x.provider}:{x.provider_id}" for x in check.strangers),
            kept=tuple(f"{v.name} ${v.usd_per_month:.2f}/month" for v in check.kept),
            nothing_bills=check.nothing_bills,
            error=_clean(check.error),
        )
    )
    _remember(store, check, name, remember_in)
    return check


async def _settle(
    provider: Provider,
    store: RecordStore,
    sink: EventSink,
    settings: WalkSettings,
    listed: Sequence[LeaseStatus],
    prefix: str,
    owner_tag: str,
    run_id: str | None,
    failed: set[str],
    end_strangers: set[str],
    clock: Clock,
) -> _Outcome:
    """Destroy (confirmed) every listed instance of ours in scope; report the others."""
    tally = _Outcome()
    holdings = Holdings.of(store.scan().runs, provider.info.name)
    by_run: dict[str, list[LeaseStatus]] = {}
    for status in listed:
        if status.state is LeaseState.GONE:
            continue
        whose = claim(status, prefix, owner_tag, holdings)  # exact: `mvpx-…` is not `mvp`'s
        if whose.whose is Whose.STRANGER:
            stranger = Stranger.of(provider.info.name, status, whose.why, clock())
            if status.provider_id in end_strangers:
                await _end_stranger(provider, settings, stranger, tally)
            else:
                tally.strangers.append(stranger)
        else:
            by_run.setdefault(whose.run_id, []).append(status)
    _forget_unlisted(store, provider.info.name, prefix, run_id, by_run)
    for run, statuses in by_run.items():
        held = [Held(s.provider_id, s.label or "", run, s.raw_state or s.state.value)
                for s in statuses]
        if run_id is not None and run != run_id:
            tally.other_runs += held
            continue
        record = _record_for(store, provider, run, prefix, owner_tag, clock)
        if record is None:
            why = "its run record could not be read or written, so it was not destroyed"
            tally.unconfirmed += [_why(h, why) for h in held]
            continue
        for status, found in zip(statuses, held, strict=True):
            if status.provider_id in failed:
                known = record.lease_by_id(status.provider_id)
                tally.unconfirmed.append(_why(found, known.detail if known else "still listed"))
                continue
            if await _already_gone(provider, record, status):
                continue  # a confirmed delete the listing has not caught up with
            lease = track(record, status, clock())
            if lease.state is LeaseRecordState.DELETED:
                lease.state = LeaseRecordState.DELETING  # listed and not gone: it may bill
            try:
                store.save(record)  # on record before anything is done to it
                ok = await teardown_lease(
                    provider, store, record, lease, sink, settings,
                    reason=DeleteReason.STRAY, clock=clock,
                )
            except OSError as exc:
                ok = lease.state is LeaseRecordState.DELETED
                lease.detail = f"{lease.detail}; the record could not be written: {exc}"
            if ok:
                tally.destroyed.append(found)
            else:
                tally.unconfirmed.append(_why(found, lease.detail))
    return tally


async def _end_stranger(
    provider: Provider, settings: WalkSettings, stranger: Stranger, tally: _Outcome
) -> None:
    """Destroy, confirmed, an instance not made here that the person listed and confirmed."""
    check = await delete_confirmed(provider, stranger.provider_id, settings)
    if check.confirmed:
        tally.ended.append(stranger)
    else:
        why = f"{stranger.why}; its destroy was asked and NOT confirmed: {check.reason}"
        tally.strangers.append(replace(stranger, why=why))


async def _listed_until_agreed(
    provider: Provider, store: RecordStore, settings: WalkSettings, prefix: str,
    run_id: str | None,
) -> list[LeaseStatus]:
    """The account under `prefix`. While an unclear create in scope is not in it, it is
    listed again after each reconcile wait (a bounded time): a listing that lags behind a
    create must not turn "may exist" into "none", so a placeholder is forgotten only when
    every listing agrees. Everything any listing showed is kept (the latest state wins)."""
    listed = await provider.list_by_label(f"{prefix}-")
    seen = {s.provider_id: s for s in listed}
    for wait in settings.reconcile_waits_s:
        if not _unlisted_unclear(store, provider.info.name, prefix, run_id, seen.values()):
            break
        await settings.sleep(wait)
        seen.update((s.provider_id, s) for s in await provider.list_by_label(f"{prefix}-"))
    return list(seen.values())


def _unlisted_unclear(
    store: RecordStore, provider: str, prefix: str, run_id: str | None,
    listed: Iterable[LeaseStatus],
) -> list[str]:
    """Labels of unclear creates in scope (no id: a create never answered) not listed."""
    labels = {s.label for s in listed}
    return [
        x.label
        for record in store.scan().runs
        if (record.provider, record.label_prefix) == (provider, prefix)
        and (run_id is None or record.run_id == run_id)
        for x in record.open_leases()
        if x.provider_id is None and x.label not in labels
    ]


def _forget_unlisted(
    store: RecordStore,
    provider: str,
    prefix: str,
    run_id: str | None,
    by_run: Mapping[str, Sequence[LeaseStatus]],
) -> None:
    """Unclear creates in scope that complete listings over the reconcile waits agree do not
    show (`_listed_until_agreed`): none exist."""
    for record in store.scan().runs:
        in_scope = run_id is None or record.run_id == run_id
        unclear = any(x.provider_id is None for x in record.open_leases())
        if in_scope and unclear and (record.provider, record.label_prefix) == (provider, prefix):
            drop_unlisted_placeholders(record, by_run.get(record.run_id, []), None)
            with contextlib.suppress(OSError):
                store.save(record)


async def _already_gone(provider: Provider, record: RunRecord, status: LeaseStatus) -> bool:
    lease = record.lease_by_id(status.provider_id)
    if lease is None or lease.state is not LeaseRecordState.DELETED:
        return False
    return bool(await is_gone(provider, status.provider_id))


def _why(held: Held, reason: str) -> Held:
    return Held(held.provider_id, held.label, held.run_id, held.state, reason)


def _record_for(
    store: RecordStore, provider: Provider, run_id: str, prefix: str, owner_tag: str,
    clock: Clock,
) -> RunRecord | None:
    """The run's record, made when the account holds an instance carrying this install's
    tag that no record holds (a state dir wiped or lost): every lease is on record before
    its destroy."""
    try:
        if store.record_path(run_id).exists():
            record = store.load(run_id)
            return record if record.provider == provider.info.name else None
        return store.create_run(
            run_id, provider=provider.info.name, label_prefix=prefix, created_at=clock(),
            owner_tag=owner_tag,
        )
    except (RecordError, OSError, ValueError):
        return None


async def _with_volumes(
    provider: Provider, store: RecordStore, check: AccountCheck
) -> AccountCheck:
    recorded = [v.volume_id for v in load_volumes(store.state_dir)
                if v.provider == provider.info.name]
    try:
        kept = await provider.kept_volumes(recorded)
    except ProviderError as exc:
        return replace(check, volumes_error=str(exc))
    return replace(check, kept=tuple(kept))


def _remember(
    store: RecordStore, check: AccountCheck, provider: str, also: Collection[str]
) -> None:
    """Write the outcome into the records in scope: the run's, or (for every run) each
    record of this provider the check touched, named in `also`, or still open."""
    if check.run_id is not None:
        runs = [check.run_id]
    else:
        touched = {h.run_id for h in (*check.destroyed, *check.unconfirmed)} | set(also)
        scanned = store.scan().runs
        runs = sorted(touched | {r.run_id for r in scanned if r.provider == provider and r.is_open})
    for run in runs:
        with contextlib.suppress(RecordError, OSError, ValueError):
            if not store.record_path(run).exists():
                continue
            record = store.load(run)
            record.account_check = check.to_json()
            store.save(record)


def recorded_check(record: RunRecord) -> AccountCheck | None:
    """The last account check written into `record` (None in records older than checks)."""
    return AccountCheck.from_json(record.account_check)
