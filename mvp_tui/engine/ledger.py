"""The lease ledger: the one fold of lease money. Every place that shows or enforces what a
lease costs reads it — the status bar, the Leases pane, the Bootstrap pane's wait line, the
quit question, the spend and hours limits, the exit receipt and `mvp-tui ls`.

Per lease: its state as far as money goes, its billing start (the create's answer: the
provider bills from there, storage at least), its rate, its spend and whether it may still
bill. It is fed the engine's events, once, where the engine emits them (`LedgerTap`), and
is rebuilt from run records alone (`from_records`) — the engine writes each record before it
emits the event that tells of it, so both say the same. Pure data: no Textual, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from mvp_tui.engine.events import NodeWatchdog
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease import events as lease
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RunRecord
from mvp_tui.lease.spend import spend_usd
from mvp_tui.untrusted import clean_line, one_line_ascii

KEY_CHARS = 80  # a provider id as a key: cleaned as the panes clean it


class Billing(enum.Enum):
    """A lease as its money stands; the words are what the user reads."""

    PENDING = "pending"  # the create answered with an id: it bills, not running yet
    RUNNING = "running"
    NOT_READY = "not ready"
    DELETING = "deleting"
    UNCONFIRMED = "delete unconfirmed"
    NODE_GONE = "gone by its node"  # the node's word: its provider has not confirmed it
    UNCLEAR = "unclear create"  # a create with no clear answer: it may exist
    DELETED = "deleted"

    @property
    def may_bill(self) -> bool:
        return self is not Billing.DELETED


@dataclass(frozen=True, slots=True)
class LeaseLine:
    """One lease's money at a moment (`LeaseLedger.rows`)."""

    key: str  # the provider id (cleaned), or the attempt's label while no id is known
    run_id: str
    provider: str
    gpu: str
    state: Billing
    price_per_hour: float
    since: float | None  # billing start: the create's answer
    uptime_s: float
    spend_usd: float
    billed_usd: float | None  # the provider's own figure, where it publishes one
    deleted_by: str | None

    @property
    def may_bill(self) -> bool:
        return self.state.may_bill


@dataclass(slots=True)
class _Held:
    run_id: str
    provider: str
    gpu: str
    price_per_hour: float
    since: float | None
    state: Billing = Billing.PENDING
    ended_at: float | None = None  # the confirmed delete, or the node's word of its end
    billed_usd: float | None = None
    deleted_by: str | None = None

    def uptime(self, now: float) -> float:
        if self.since is None:
            return 0.0
        end = self.ended_at if self.ended_at is not None else now
        return max(0.0, end - self.since)

    def spend(self, now: float) -> float:
        return spend_usd(self.price_per_hour, self.uptime(now))


@dataclass(frozen=True, slots=True)
class Volume:
    """A network volume the run mounts: it bills by the month, lease or not."""

    volume_id: str
    name: str
    usd_per_month: float


def money_text(usd: float) -> str:
    """Dollars as every place shows them (so one figure reads the same everywhere)."""
    # Seven characters up to $999.99: a cent's fraction shows while it is small.
    size = abs(usd)
    return f"${usd:.4f}" if size < 10 else f"${usd:.3f}" if size < 100 else f"${usd:,.2f}"


def _key(provider_id: str) -> str:
    return one_line_ascii(provider_id, KEY_CHARS)


@dataclass
class LeaseLedger:
    """Every lease the run (or a session's runs) made, in the order they were created."""

    _entries: dict[str, _Held] = field(default_factory=dict)
    _attempts: dict[str, tuple[str, float]] = field(default_factory=dict)  # label -> gpu, $/h
    _running: dict[str, str] = field(default_factory=dict)  # run id -> its running lease
    volumes: dict[str, Volume] = field(default_factory=dict)

    # -- fed ---------------------------------------------------------------------------------
    def apply(self, event: EngineEvent, provider: str = "") -> bool:
        """One engine event (`provider`: the kind of engine that emitted it); whether the
        ledger changed. Each handler sets state, so an event applied twice changes nothing."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return False
        handler(self, event, provider)
        return True

    def _entry(self, provider_id: str, run_id: str, provider: str, at: float) -> _Held:
        key = _key(provider_id)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Held(run_id, provider, "", 0.0, at)
        elif provider and not entry.provider:
            entry.provider = provider
        return entry

    def _started(self, e: lease.AttemptStarted, provider: str) -> None:
        self._attempts[e.label] = (clean_line(e.gpu_name, 40), e.price_per_hour)

    def _created(self, label: str, provider_id: str, run_id: str, provider: str,
                 since: float) -> None:
        entry = self._entry(provider_id, run_id, provider, since)
        gpu, price = self._attempts.get(label, ("", 0.0))
        entry.gpu = entry.gpu or gpu
        entry.price_per_hour = entry.price_per_hour or price
        entry.since = entry.since if entry.since is not None else since

    def _answered(self, e: lease.AttemptAnswered, provider: str) -> None:
        if e.outcome == "created" and e.provider_id:
            since = e.created_at if e.created_at is not None else e.at
            self._created(e.label, e.provider_id, e.run_id, provider, since)

    def _reconciled(self, e: lease.Reconciled, provider: str) -> None:
        if e.adopted_id:
            since = e.created_at if e.created_at is not None else e.at
            self._created(e.label, e.adopted_id, e.run_id, provider, since)

    def _pending(self, e: lease.LeasePending, provider: str) -> None:
        entry = self._entry(e.provider_id, e.run_id, provider, e.at)
        if e.price_per_hour:  # the instance's own rate replaces the offer's
            entry.price_per_hour = e.price_per_hour

    def _running_now(self, e: lease.LeaseRunning, provider: str) -> None:
        since = e.created_at if e.created_at is not None else e.at - e.after_s
        entry = self._entry(e.provider_id, e.run_id, provider, since)
        if entry.since is None:
            entry.since = since
        entry.price_per_hour = e.price_per_hour or entry.price_per_hour
        if entry.state.may_bill and entry.state is not Billing.NODE_GONE:
            entry.state = Billing.RUNNING
        self._running[e.run_id] = _key(e.provider_id)

    def _not_ready(self, e: lease.LeaseNotReady, provider: str) -> None:
        entry = self._entry(e.provider_id, e.run_id, provider, e.at)
        if entry.state.may_bill:
            entry.state = Billing.NOT_READY

    def _deleting(self, e: lease.LeaseDeleting, provider: str) -> None:
        entry = self._entry(e.provider_id, e.run_id, provider, e.at)
        if entry.state.may_bill:
            entry.state = Billing.DELETING

    def _deleted(self, e: lease.LeaseDeleted, provider: str) -> None:
        entry = self._entry(e.provider_id, e.run_id, provider, e.at - e.uptime_s)
        entry.state = Billing.DELETED
        if entry.since is not None:
            entry.ended_at = entry.since + e.uptime_s
        entry.billed_usd = e.billed_usd if e.billed_usd is not None else entry.billed_usd
        entry.deleted_by = e.deleted_by

    def _unconfirmed(self, e: lease.LeaseDeleteUnconfirmed, provider: str) -> None:
        entry = self._entry(e.provider_id, e.run_id, provider, e.at)
        if entry.state.may_bill:
            entry.state = Billing.UNCONFIRMED

    def _switch(self, e: NodeWatchdog, provider: str) -> None:
        """Its node destroyed (or, locally, ended) the lease: the node's word stops the
        clock; it may still bill until the provider confirms (`LeaseDeleted`)."""
        key = self._running.get(e.run_id)
        entry = self._entries.get(key) if key is not None else None
        if entry is None or e.status not in ("destroyed", "ended") or not entry.state.may_bill:
            return
        entry.state = Billing.NODE_GONE
        entry.ended_at = entry.ended_at if entry.ended_at is not None else e.at

    def _volume(self, e: lease.VolumeMounted, provider: str) -> None:
        self.volumes[e.volume_id] = Volume(
            e.volume_id, clean_line(e.name, 64), max(0.0, e.usd_per_month)
        )

    # -- rebuilt from the records --------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[RunRecord]) -> LeaseLedger:
        """The ledger of these runs from their records alone (no event needed)."""
        ledger = cls()
        for record in records:
            for x in record.leases:
                ledger._record(record.run_id, x)
        return ledger

    def _record(self, run_id: str, x: LeaseRecord) -> None:
        key, entry = _entry_of(run_id, x)
        self._entries[key] = entry

    @staticmethod
    def line_of(run_id: str, x: LeaseRecord, now: float) -> LeaseLine:
        """One recorded lease's money at `now`, as the ledger would show it."""
        key, entry = _entry_of(run_id, x)
        return LeaseLedger._line(key, entry, now)

    # -- read ------------------------------------------------------------------------------
    def rows(self, now: float, run_id: str | None = None) -> list[LeaseLine]:
        return [
            self._line(key, entry, now)
            for key, entry in self._entries.items()
            if run_id is None or entry.run_id == run_id
        ]

    def row(self, provider_id: str, now: float) -> LeaseLine | None:
        key = _key(provider_id)
        entry = self._entries.get(key)
        return self._line(key, entry, now) if entry is not None else None

    @staticmethod
    def _line(key: str, entry: _Held, now: float) -> LeaseLine:
        return LeaseLine(
            key, entry.run_id, entry.provider, entry.gpu, entry.state, entry.price_per_hour,
            entry.since, entry.uptime(now), entry.spend(now), entry.billed_usd, entry.deleted_by,
        )

    def spent(self, now: float, run_id: str | None = None) -> float:
        """USD so far over every lease (of one run when given)."""
        return sum(line.spend_usd for line in self.rows(now, run_id))

    def rate(self, run_id: str | None = None) -> float:
        """USD/h of the leases that bill now."""
        return sum(
            e.price_per_hour for e in self._entries.values()
            if (run_id is None or e.run_id == run_id) and _bills_now(e)
        )

    def hours(self, now: float, run_id: str | None = None) -> float:
        """Hours since the oldest lease's create answer (the `max_hours` limit)."""
        return max((line.uptime_s for line in self.rows(now, run_id)), default=0.0) / 3600.0

    @property
    def may_bill(self) -> tuple[str, ...]:
        """The leases that may still bill, by key."""
        return tuple(k for k, e in self._entries.items() if e.state.may_bill)

    @property
    def live(self) -> int:
        """How many leases bill now (the header's "N lease(s) live")."""
        return sum(1 for e in self._entries.values() if _bills_now(e))

    @property
    def volume_usd_per_month(self) -> float:
        return sum(v.usd_per_month for v in self.volumes.values())

    def receipt(self, now: float, unchecked: Collection[str] = ()) -> list[str]:
        """What the shell is told once the dashboard has gone: a line per lease, then each
        run's total; none when nothing was leased. `unchecked`: runs whose account the
        provider could not list after the teardown (their "nothing bills" is not proven)."""
        lines = self.rows(now)
        if not lines:
            return []
        out = [_receipt_line(line) for line in lines]
        runs: dict[str, list[LeaseLine]] = {}
        for line in lines:
            runs.setdefault(line.run_id, []).append(line)
        out += [_total(run_id, leases, run_id in unchecked) for run_id, leases in runs.items()]
        return out


def _entry_of(run_id: str, x: LeaseRecord) -> tuple[str, _Held]:
    key = _key(x.provider_id) if x.provider_id else f"label {one_line_ascii(x.label, 64)}"
    state = _RECORD_STATES[x.state]
    if x.provider_id is None and state is not Billing.DELETED:
        state = Billing.UNCLEAR
    return key, _Held(
        run_id, x.provider, clean_line(x.gpu_name, 40), x.price_per_hour, x.created_at,
        state=state, ended_at=x.deleted_at if state is Billing.DELETED else None,
        billed_usd=x.billed_usd, deleted_by=x.deleted_by,
    )


def _bills_now(entry: _Held) -> bool:
    """It bills now at its rate: created, not confirmed gone, not stopped by its node."""
    return (
        entry.state.may_bill and entry.since is not None and entry.state is not Billing.NODE_GONE
    )


def uptime_text(seconds: float) -> str:
    """`0:00:25`: a lease's uptime, always with its hours."""
    text = clock_text(seconds)
    return text if text.count(":") == 2 else f"0:{text.zfill(5)}"


def _receipt_line(line: LeaseLine) -> str:
    what = ", ".join(clean_line(t, 40) for t in (line.provider, line.gpu) if t)
    head = f"lease {clean_line(line.key, KEY_CHARS)}" + (f" ({what})" if what else "")
    clock = uptime_text(line.uptime_s)
    if line.state is Billing.DELETED:
        billed = f" (billed {money_text(line.billed_usd)})" if line.billed_usd is not None else ""
        how = (
            "destroyed, confirmed by the provider" if line.deleted_by != "node"
            else "gone (its node destroyed it), confirmed by the provider"
        )
        return f"{head}: {how} · {clock} · {money_text(line.spend_usd)}{billed}"
    why = {
        Billing.DELETING: "teardown NOT confirmed",
        Billing.UNCONFIRMED: "teardown NOT confirmed",
        Billing.NODE_GONE: "its node says it destroyed it, NOT confirmed by the provider",
        Billing.UNCLEAR: "an unclear create that may exist",
    }.get(line.state, "KEPT RUNNING")
    return (
        f"{head}: {why}, still bills ${line.price_per_hour:.3f}/h · {clock} · "
        f"{money_text(line.spend_usd)} so far; end it with "
        f"`mvp-tui down {clean_line(line.run_id, 64)}`"
    )


def _total(run_id: str, leases: list[LeaseLine], unchecked: bool = False) -> str:
    spent = sum(x.spend_usd for x in leases)
    billed = [x.billed_usd for x in leases]
    billed_text = (
        f" (billed {money_text(sum(b for b in billed if b is not None))})"
        if all(b is not None for b in billed) else ""
    )
    live = sum(1 for x in leases if x.may_bill)
    done = " · every delete confirmed (account not checked)" if unchecked else " · nothing bills"
    tail = f" · {live} may still bill" if live else done
    count = f"{len(leases)} lease" + ("s" if len(leases) != 1 else "")
    return f"run {clean_line(run_id, 64)}: {count} · {money_text(spent)}{billed_text}{tail}"


class LedgerTap:
    """The engine's sink with the ledger in front: each event is entered, then passed on."""

    def __init__(self, ledger: LeaseLedger, sink: EventSink, provider: str) -> None:
        self.ledger, self._sink, self._provider = ledger, sink, provider

    def __call__(self, event: EngineEvent) -> None:
        self.ledger.apply(event, self._provider)
        self._sink(event)


_RECORD_STATES = {
    LeaseRecordState.CREATING: Billing.UNCLEAR,
    LeaseRecordState.UNKNOWN: Billing.UNCLEAR,
    LeaseRecordState.PENDING: Billing.PENDING,
    LeaseRecordState.RUNNING: Billing.RUNNING,
    LeaseRecordState.DELETING: Billing.DELETING,
    LeaseRecordState.DELETED: Billing.DELETED,
}

_HANDLERS: dict[type[EngineEvent], Callable[[LeaseLedger, Any, str], None]] = {
    lease.AttemptStarted: LeaseLedger._started,
    lease.AttemptAnswered: LeaseLedger._answered,
    lease.Reconciled: LeaseLedger._reconciled,
    lease.LeasePending: LeaseLedger._pending,
    lease.LeaseRunning: LeaseLedger._running_now,
    lease.LeaseNotReady: LeaseLedger._not_ready,
    lease.LeaseDeleting: LeaseLedger._deleting,
    lease.LeaseDeleted: LeaseLedger._deleted,
    lease.LeaseDeleteUnconfirmed: LeaseLedger._unconfirmed,
    lease.VolumeMounted: LeaseLedger._volume,
    NodeWatchdog: LeaseLedger._switch,
}
