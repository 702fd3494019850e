"""What the Leases pane shows, as pure data built from lease-walk events (no Textual here).

Two parts: a bounded history with one line per create attempt (later answers about the same
attempt or lease extend its line: "unavailable → next", "ambiguous (500) → reconciled:
adopted 7002", "not ready → deleted"), and every lease the run made with its state, uptime
and estimated spend. Event texts from providers are sanitised before they are kept.

Each lease also carries what its node's dead-man's switch said (`NodeWatchdog`): armed with
its deadline, failed, fired, or that the node destroyed (or, locally, ended) the lease itself.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from mvp_tui.engine.events import (
    AttemptAbandoned,
    NodeReady,
    NodeReplacing,
    NodeWatchdog,
    WalkOrderSaid,
)
from mvp_tui.engine.ledger import LeaseLedger, LeaseLine, money_text
from mvp_tui.events import EngineEvent
from mvp_tui.lease.events import (
    AttemptAnswered,
    AttemptStarted,
    LeaseDeleted,
    LeaseDeleteUnconfirmed,
    LeaseDeleting,
    LeaseNotReady,
    LeasePending,
    LeaseRunning,
    OfferSkipped,
    Reconciled,
    ReconcileStarted,
    SecretLeftOver,
    Sweep,
    WalkFailed,
    WalkReordered,
)
from mvp_tui.untrusted import clean_line, one_line_ascii
from mvp_tui.widgets.node_switch import armed_text, finite

HISTORY_LINES = 200
LEASES_KEPT = 20
DETAIL_CHARS = 80
FULL_CHARS = 4000  # a provider or node text kept whole for the detail view
REASON_CHARS = 400  # a failed switch's reason names its fix: kept whole (history wraps)


class Tone(enum.Enum):
    """How a piece of a line reads; the pane maps each to a theme colour class."""

    PLAIN = "plain"
    PENDING = "pending"
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    MUTED = "muted"


class LeaseDisplayState(enum.Enum):
    """A lease as the pane shows it; the words are what the user reads."""

    PENDING = "pending"
    RUNNING = "running"
    NOT_READY = "not ready"
    DELETING = "deleting"
    DELETED = "deleted"
    UNCONFIRMED = "delete unconfirmed"
    # The node's switch destroyed (ended) it: the node's word until `LeaseDeleted` confirms,
    # so it still counts as one that may bill.
    NODE_DESTROYED = "destroyed by node"
    NODE_ENDED = "ended by node"

    @property
    def may_bill(self) -> bool:
        return self is not LeaseDisplayState.DELETED


class SwitchStatus(enum.Enum):
    """The node's dead-man's switch, as its reports left it."""

    ARMED = "ready"  # the verdict: it can destroy its own lease (armed or not: `armed`)
    FAILED = "failed"  # it cannot (the reason says why)
    FIRED = "fired"  # the deadline or the silence passed: destroying
    DESTROYED = "destroyed"  # it destroyed its lease (the provider said gone)
    ENDED = "ended"  # a local node: the switch ended the engine and the agent
    NONE = "none"  # the node got ready without a verdict: no switch runs there


@dataclass(slots=True)
class SwitchView:
    """What a lease's node said about its switch."""

    status: SwitchStatus
    deadline_at: float | None = None
    idle_mins: float | None = None
    armed: bool = False
    trigger: str = ""
    reason: str = ""


@dataclass(slots=True)
class HistoryLine:
    """One attempt (or walk-level note): a time, then pieces appended as answers come."""

    at: float
    parts: list[tuple[str, Tone]]
    label: str | None = None
    provider_id: str | None = None
    notes: list[str] = field(default_factory=list)  # provider/node texts uncut (detail view)

    def add(self, text: str, tone: Tone) -> None:
        self.parts.append((text, tone))

    def note(self, text: str) -> None:
        """Keep a text the line shows cut, whole, for the detail view."""
        if len(text) > DETAIL_CHARS:
            self.notes.append(clean_line(text, FULL_CHARS))

    def full_text(self, tz: tzinfo | None) -> str:
        parts = "  ".join(part for part, _ in self.parts)
        head = f"{clock_text(self.at, tz)}  {parts}"
        return "\n".join([head, *(f"    {note}" for note in self.notes)])


@dataclass(slots=True)
class LeaseView:
    """One lease the run made."""

    provider_id: str
    gpu: str = ""
    state: LeaseDisplayState = LeaseDisplayState.PENDING
    endpoint: str = ""
    switch: SwitchView | None = None
    current_price: float | None = None  # the provider's quote now, when above the leased one
    out_of_stock: bool = False  # the board lists no offer of its GPU type to re-lease


@dataclass(slots=True)
class _Attempt:
    gpu: str


def _detail(text: str) -> str:
    return one_line_ascii(text, DETAIL_CHARS)


def clock_text(at: float, tz: tzinfo | None) -> str:
    """HH:MM:SS of an event time, in `tz` (None: local time)."""
    return datetime.fromtimestamp(at, tz).strftime("%H:%M:%S")


def uptime_text(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def switch_text(lease: LeaseView, tz: tzinfo | None, now: float) -> tuple[str, Tone]:
    """The lease's node switch in a few words: "switch armed · ends 14:32", "no switch",
    "switch FAILED", …; ("", PLAIN) when there is nothing to say (e.g. a lease that never ran
    an agent and is gone)."""
    switch = lease.switch
    if switch is None:
        if lease.state is LeaseDisplayState.RUNNING:
            return "switch pending", Tone.PENDING  # the node has not given its verdict yet
        return "", Tone.PLAIN
    status = switch.status
    if status is SwitchStatus.DESTROYED:
        return f"its node destroyed it ({switch.trigger})", Tone.WARN
    if status is SwitchStatus.ENDED:
        return f"its node ended it ({switch.trigger})", Tone.WARN
    if not lease.state.may_bill:
        return "", Tone.PLAIN  # gone, by the dashboard's hand: the switch went with it
    if status is SwitchStatus.FAILED:
        return "switch FAILED", Tone.FAIL
    if status is SwitchStatus.FIRED:
        return f"switch fired ({switch.trigger}): destroying", Tone.PENDING
    if status is SwitchStatus.NONE:
        return "no switch", Tone.WARN
    if not switch.armed:
        return "switch not armed", Tone.WARN
    text = armed_text(
        armed=True,
        deadline_at=switch.deadline_at,
        idle_mins=switch.idle_mins,
        tz=tz,
        ref=now,
        compact=True,
    )
    return f"switch {text}", Tone.OK


@dataclass
class LeasesModel:
    """Folds lease events into history lines and lease views; `apply` says if anything changed."""

    history: deque[HistoryLine] = field(default_factory=lambda: deque(maxlen=HISTORY_LINES))
    leases: dict[str, LeaseView] = field(default_factory=dict)
    tz: tzinfo | None = None  # clock times in history text (the switch's deadline); None: local
    # Where the leases' money is read: the app's (fed by the engine: `feeds_ledger` False),
    # or the model's own, which it feeds itself (a pane on its own, in tests).
    ledger: LeaseLedger = field(default_factory=LeaseLedger)
    feeds_ledger: bool = True
    _by_label: dict[str, HistoryLine] = field(default_factory=dict)
    _by_lease: dict[str, HistoryLine] = field(default_factory=dict)
    _attempts: dict[str, _Attempt] = field(default_factory=dict)
    _node_lease: dict[str, str] = field(default_factory=dict)  # run id -> its running lease

    def apply(self, event: EngineEvent) -> bool:
        if self.feeds_ledger:
            self.ledger.apply(event)
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return False
        handler(self, event)
        return True

    def money(self, lease: LeaseView, now: float) -> LeaseLine | None:
        """The lease's uptime, rate and spend, as the ledger has them."""
        return self.ledger.row(lease.provider_id, now)

    # -- lines ------------------------------------------------------------------------------
    def _new_line(
        self, at: float, *parts: tuple[str, Tone], label: str | None = None
    ) -> HistoryLine:
        if len(self.history) == self.history.maxlen:
            gone = self.history[0]
            if gone.label is not None:
                self._by_label.pop(gone.label, None)
            if gone.provider_id is not None:
                self._by_lease.pop(gone.provider_id, None)
        line = HistoryLine(at, list(parts), label=label)
        self.history.append(line)
        if label is not None:
            self._by_label[label] = line
        return line

    def _lease_line(self, at: float, provider_id: str) -> HistoryLine:
        provider_id = _detail(provider_id)  # provider text: every key is the cleaned id
        line = self._by_lease.get(provider_id)
        if line is None:
            line = self._new_line(at, (f"lease {provider_id}", Tone.PLAIN))
            self._link(line, provider_id)
        return line

    def _link(self, line: HistoryLine, provider_id: str) -> None:
        line.provider_id = provider_id
        self._by_lease[provider_id] = line

    def _lease(self, provider_id: str) -> LeaseView:
        provider_id = _detail(provider_id)
        lease = self.leases.get(provider_id)
        if lease is None:
            lease = self.leases[provider_id] = LeaseView(provider_id)
            self._trim_leases()
        return lease

    def _trim_leases(self) -> None:
        while len(self.leases) > LEASES_KEPT:
            done = [k for k, v in self.leases.items() if not v.state.may_bill]
            if not done:
                return  # never forget a lease that may still bill
            del self.leases[done[0]]

    # -- events -----------------------------------------------------------------------------
    def _started(self, e: AttemptStarted) -> None:
        gpu = _detail(e.gpu_name)
        self._attempts[e.label] = _Attempt(gpu)
        self._new_line(
            e.at,
            (f"offer {_detail(e.offer_id)}  {gpu} ${e.price_per_hour:.3f}/h", Tone.PLAIN),
            ("creating…", Tone.PENDING),
            label=e.label,
        )

    def _answered(self, e: AttemptAnswered) -> None:
        line = self._by_label.get(e.label) or self._new_line(
            e.at, (f"offer {_detail(e.offer_id)}", Tone.PLAIN), label=e.label
        )
        _drop_pending(line)
        status = f" ({e.http_status})" if e.http_status is not None else ""
        detail = f": {_detail(e.detail)}" if e.detail else ""
        outcome = e.outcome
        if outcome == "created" and e.provider_id:
            pid = _detail(e.provider_id)
            line.add(f"created {pid}", Tone.OK)
            self._link(line, pid)
            lease = self._lease(pid)
            attempt = self._attempts.get(e.label)
            if attempt is not None:
                lease.gpu = attempt.gpu
        elif outcome in ("unavailable", "forbidden"):
            line.add(f"{outcome}{status}{detail} → next", Tone.WARN)
        elif outcome == "ambiguous":
            line.add(f"ambiguous{status}", Tone.WARN)
            line.add("→ reconciling…", Tone.PENDING)
        else:
            line.add(f"{outcome}{status}{detail} → stop", Tone.FAIL)
        line.note(e.detail)

    def _reconcile_started(self, e: ReconcileStarted) -> None:
        line = self._by_label.get(e.label)
        if line is not None and not any(t == "→ reconciling…" for t, _ in line.parts):
            line.add("→ reconciling…", Tone.PENDING)

    def _reconciled(self, e: Reconciled) -> None:
        line = self._by_label.get(e.label) or self._new_line(
            e.at, (f"attempt {_detail(e.label)}", Tone.PLAIN), label=e.label
        )
        _drop_pending(line)
        if e.adopted_id:
            pid = _detail(e.adopted_id)
            line.add(f"→ reconciled: adopted {pid}", Tone.OK)
            self._link(line, pid)
            lease = self._lease(pid)
            attempt = self._attempts.get(e.label)
            if attempt is not None:
                lease.gpu = attempt.gpu
        else:
            line.add("→ reconciled: none found → next", Tone.WARN)
        if e.destroyed:
            line.add(f"{len(e.destroyed)} duplicate(s) destroyed", Tone.MUTED)
        if e.unconfirmed:
            ids = ", ".join(_detail(i) for i in e.unconfirmed)
            line.add(f"duplicate delete unconfirmed: {ids} may bill", Tone.FAIL)

    def _pending(self, e: LeasePending) -> None:
        self._lease(e.provider_id)  # shown as pending until it runs

    def _running(self, e: LeaseRunning) -> None:
        lease = self._lease(e.provider_id)
        lease.state = LeaseDisplayState.RUNNING
        self._node_lease[e.run_id] = lease.provider_id
        lease.endpoint = f"{_detail(e.host)}:{e.port} {_detail(e.via)}"
        self._lease_line(e.at, e.provider_id).add(f"→ running after {e.after_s:.1f} s", Tone.OK)

    def _not_ready(self, e: LeaseNotReady) -> None:
        self._lease(e.provider_id).state = LeaseDisplayState.NOT_READY
        line = self._lease_line(e.at, e.provider_id)
        line.add(f"→ not ready: {_detail(e.reason)}", Tone.FAIL)
        line.note(e.reason)

    def _deleting(self, e: LeaseDeleting) -> None:
        self._lease(e.provider_id).state = LeaseDisplayState.DELETING
        line = self._lease_line(e.at, e.provider_id)
        line.add(f"→ deleting ({e.reason.value.replace('_', ' ')})…", Tone.PENDING)

    def _deleted(self, e: LeaseDeleted) -> None:
        lease = self._lease(e.provider_id)
        by_node = e.deleted_by == "node" or lease.state in (
            LeaseDisplayState.NODE_DESTROYED,
            LeaseDisplayState.NODE_ENDED,
        )  # already gone when deleted: its node's switch or guard did it
        lease.state = LeaseDisplayState.DELETED
        line = self._lease_line(e.at, e.provider_id)
        _drop_pending(line)
        cost = money_text(e.spend_usd)
        if e.billed_usd is not None:  # the provider's receipt beside our estimate
            cost = f"est. {cost}, billed {money_text(e.billed_usd)}"
        line.add(f"→ {'confirmed gone' if by_node else 'deleted'} ({cost})", Tone.OK)
        self._trim_leases()

    # -- the node's dead-man's switch -------------------------------------------------------
    def _switch(self, e: NodeWatchdog) -> None:
        provider_id = self._node_lease.get(e.run_id)
        lease = self.leases.get(provider_id) if provider_id is not None else None
        if lease is None:
            return  # no running lease of this run is known: nothing to put it on
        status = SwitchStatus(e.status) if e.status in _SWITCH_STATUSES else None
        if status is None:
            return
        trigger = one_line_ascii(e.trigger, 16) or "?"
        reason = " ".join(clean_line(e.reason, REASON_CHARS).split())
        old = lease.switch
        lease.switch = SwitchView(
            status,
            deadline_at=finite(e.deadline_at),
            idle_mins=finite(e.idle_teardown_mins),
            armed=e.armed,
            trigger=trigger,
            reason=reason,
        )
        if old is not None and status in (SwitchStatus.FIRED, SwitchStatus.DESTROYED):
            # Reports after the verdict carry what it said; keep it if they do not.
            lease.switch.deadline_at = lease.switch.deadline_at or old.deadline_at
            lease.switch.idle_mins = lease.switch.idle_mins or old.idle_mins
        line = self._lease_line(e.at, lease.provider_id)
        if status is SwitchStatus.ARMED:
            verdict = armed_text(
                armed=e.armed,
                deadline_at=lease.switch.deadline_at,
                idle_mins=lease.switch.idle_mins,
                tz=self.tz,
                ref=e.at,
            )
            line.add(f"→ node switch {verdict}", Tone.OK if e.armed else Tone.WARN)
        elif status is SwitchStatus.FAILED:
            line.add(f"→ node switch FAILED: {reason or 'no reason given'}", Tone.FAIL)
        elif status is SwitchStatus.FIRED:
            line.add(f"→ node switch fired ({trigger}): destroying its lease…", Tone.PENDING)
        elif status in (SwitchStatus.DESTROYED, SwitchStatus.ENDED):
            _drop_pending(line)
            destroyed = status is SwitchStatus.DESTROYED
            line.add(
                f"→ its node {'destroyed' if destroyed else 'ended'} it ({trigger})", Tone.WARN
            )
            if lease.state.may_bill:
                # The node's word (the ledger stops its clock); `LeaseDeleted` has the last say.
                lease.state = (
                    LeaseDisplayState.NODE_DESTROYED if destroyed else LeaseDisplayState.NODE_ENDED
                )

    def _node_ready(self, e: NodeReady) -> None:
        """Ready without a verdict: the node runs no switch."""
        provider_id = self._node_lease.get(e.run_id)
        lease = self.leases.get(provider_id) if provider_id is not None else None
        if lease is not None and lease.switch is None and lease.state is LeaseDisplayState.RUNNING:
            lease.switch = SwitchView(SwitchStatus.NONE)
            self._lease_line(e.at, lease.provider_id).add("→ no node switch reported", Tone.WARN)

    def _unconfirmed(self, e: LeaseDeleteUnconfirmed) -> None:
        self._lease(e.provider_id).state = LeaseDisplayState.UNCONFIRMED
        line = self._lease_line(e.at, e.provider_id)
        _drop_pending(line)
        line.add(f"→ delete UNCONFIRMED, may still bill: {_detail(e.reason)}", Tone.FAIL)
        line.note(e.reason)

    def _secret_left(self, e: SecretLeftOver) -> None:
        """A secret (the pod's host key) still on the account: it does not bill, so a
        warning with its remedy, never the failure tone of a lease that may bill."""
        text = f"secret {_detail(e.name)} left on the account (does not bill): {_detail(e.reason)}"
        line = self._new_line(e.at, (text, Tone.WARN))
        line.notes.append(clean_line(f"{e.reason}; remove it: {e.fix}", FULL_CHARS))  # always

    def _skipped(self, e: OfferSkipped) -> None:
        self._new_line(
            e.at, (f"offer {_detail(e.offer_id)}  skipped: {_detail(e.reason)}", Tone.MUTED)
        )

    def _walk_failed(self, e: WalkFailed) -> None:
        what = e.failure.value.replace("_", " ")
        line = self._new_line(
            e.at,
            (f"no lease ({what}) after {e.attempts} attempt(s): {_detail(e.reason)}", Tone.FAIL),
        )
        line.note(e.reason)

    def _abandoned(self, e: AttemptAbandoned) -> None:
        """A host failed on the way to serving (or was lost): it goes, the walk goes on."""
        if not e.provider_id or e.stage == "serving":
            return  # a node lost while serving: its `NodeReplacing` line says it all
        line = self._lease_line(e.at, e.provider_id)
        then = "→ next offer" if e.scope == "host" else "→ stop (every host would fail)"
        stage = _detail(e.stage)
        line.add(f"→ failed at {stage}: {_detail(e.reason)} {then}", Tone.FAIL)
        line.note(e.reason + (f"; fix: {e.fix}" if e.fix else ""))

    def _replacing(self, e: NodeReplacing) -> None:
        line = self._lease_line(e.at, e.provider_id)
        line.add(f"→ lost while serving: {_detail(e.reason)} → replacing it", Tone.WARN)
        line.note(e.reason)

    def _order(self, e: WalkOrderSaid | WalkReordered) -> None:
        names = [_detail(x) for x in e.offers]
        kinds = {n.partition(":")[0] for n in names}
        one = len(kinds) == 1 and all(":" in n for n in names)  # one provider: say it once
        ids = [n.partition(":")[2] for n in names] if one else names
        shown = ", ".join(ids[:6]) + (f" +{len(ids) - 6}" if len(ids) > 6 else "")
        whose = f" ({next(iter(kinds))})" if one else ""
        self._new_line(
            e.at,
            (f"walk order{whose}: {shown or 'no offer left'} · {_detail(e.reason)}", Tone.MUTED),
        ).note(", ".join(names))

    # -- the detail view ----------------------------------------------------------------------
    def full_text(self, provider_id: str | None = None) -> str:
        """Every history line uncut (those of one lease when given), for the detail view."""
        lines = [
            line.full_text(self.tz)
            for line in self.history
            if provider_id is None or line.provider_id == provider_id
        ]
        return "\n".join(lines)

    def _sweep(self, e: Sweep) -> None:
        if not e.listed:
            self._new_line(e.at, (f"sweep {_detail(e.prefix)}: could not list", Tone.FAIL))
            return
        text = f"sweep {_detail(e.prefix)}: found {len(e.found)}, destroyed {len(e.destroyed)}"
        tone = Tone.MUTED
        if e.unconfirmed:
            text += f", UNCONFIRMED {len(e.unconfirmed)}"
            tone = Tone.FAIL
        self._new_line(e.at, (text, tone))


_SWITCH_STATUSES = frozenset(s.value for s in SwitchStatus if s is not SwitchStatus.NONE)


def _drop_pending(line: HistoryLine) -> None:
    """An answer replaces the "…in progress" piece it answers."""
    if line.parts and line.parts[-1][1] is Tone.PENDING:
        line.parts.pop()


_HANDLERS: dict[type[EngineEvent], Callable[[LeasesModel, Any], None]] = {
    AttemptStarted: LeasesModel._started,
    AttemptAnswered: LeasesModel._answered,
    ReconcileStarted: LeasesModel._reconcile_started,
    Reconciled: LeasesModel._reconciled,
    LeasePending: LeasesModel._pending,
    LeaseRunning: LeasesModel._running,
    LeaseNotReady: LeasesModel._not_ready,
    LeaseDeleting: LeasesModel._deleting,
    LeaseDeleted: LeasesModel._deleted,
    LeaseDeleteUnconfirmed: LeasesModel._unconfirmed,
    OfferSkipped: LeasesModel._skipped,
    SecretLeftOver: LeasesModel._secret_left,
    WalkFailed: LeasesModel._walk_failed,
    Sweep: LeasesModel._sweep,
    NodeWatchdog: LeasesModel._switch,
    NodeReady: LeasesModel._node_ready,
    AttemptAbandoned: LeasesModel._abandoned,
    NodeReplacing: LeasesModel._replacing,
    WalkOrderSaid: LeasesModel._order,
    WalkReordered: LeasesModel._order,
}
