"""The lease ledger: one fold of lease money, fed by events or rebuilt from the record, and
the receipt it says (a line per lease, then each run's total)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.engine.events import NodeWatchdog
from mvp_tui.engine.ledger import Billing, LeaseLedger, LedgerTap, money_text
from mvp_tui.engine.limits import Limits
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as ev
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore

T0 = 1_764_504_180.0
RUN = "r-7f3a"


def created(provider_id: str, label: str, at: float, price: float,
            gpu: str = "RTX 3090") -> list[EngineEvent]:
    return [
        ev.AttemptStarted(at=at - 1, run_id=RUN, label=label, offer_id="1", gpu_name=gpu,
                          price_per_hour=price, attempt=1),
        ev.AttemptAnswered(at=at + 0.02, run_id=RUN, label=label, offer_id="1",
                           outcome="created", http_status=200, detail="",
                           provider_id=provider_id, created_at=at),
    ]


def running(provider_id: str, label: str, created_at: float, after_s: float,
            price: float) -> ev.LeaseRunning:
    return ev.LeaseRunning(at=created_at + after_s, run_id=RUN, provider_id=provider_id,
                           label=label, host="h", port=22, user="root", via="direct",
                           after_s=after_s, price_per_hour=price, created_at=created_at)


def deleted(provider_id: str, created_at: float, uptime_s: float, price: float,
            billed: float | None = None) -> ev.LeaseDeleted:
    return ev.LeaseDeleted(at=created_at + uptime_s, run_id=RUN, provider_id=provider_id,
                           uptime_s=uptime_s, spend_usd=round(price * uptime_s / 3600, 6),
                           billed_usd=billed)


def fed(events: list[EngineEvent]) -> LeaseLedger:
    ledger = LeaseLedger()
    for event in events:
        ledger.apply(event, "vastai")
    return ledger


def test_billing_starts_at_the_create_answer_not_at_running() -> None:
    # The review's case: answered at T+1, running after a 180 s settle, at $0.40/h.
    ledger = fed([*created("7001", "a1", T0 + 1, 0.40), running("7001", "a1", T0 + 1, 180, 0.40)])
    assert ledger.spent(T0 + 600) == pytest.approx(0.40 * 599 / 3600)
    assert money_text(ledger.spent(T0 + 600)) == "$0.0666"
    assert ledger.rate() == 0.40 and ledger.live == 1
    # Pending (not yet running) bills too: storage from the create answer on.
    pending = fed(created("7001", "a1", T0 + 1, 0.40))
    assert pending.row("7001", T0 + 61) is not None
    assert pending.spent(T0 + 61) == pytest.approx(0.40 * 60 / 3600)
    assert pending.rate() == 0.40 and pending.may_bill == ("7001",)


def test_an_event_applied_twice_changes_nothing() -> None:
    events = [*created("7001", "a1", T0, 0.4), running("7001", "a1", T0, 30, 0.4),
              deleted("7001", T0, 100, 0.4)]
    once, twice = fed(events), fed([*events, *events])
    assert once.rows(T0 + 999) == twice.rows(T0 + 999)


def test_the_receipt_names_each_lease_and_the_total() -> None:
    ledger = LeaseLedger()
    assert ledger.receipt(T0) == []
    for event in [
        *created("8001", "a1", T0, 0.26, "RTX 4090"), running("8001", "a1", T0, 5, 0.26),
        deleted("8001", T0, 25, 0.26, billed=0.0018),
        *created("8002", "a2", T0, 0.30), running("8002", "a2", T0, 5, 0.30),
        ev.LeaseDeleteUnconfirmed(at=T0 + 30, run_id=RUN, provider_id="8002", reason="timeout"),
    ]:
        ledger.apply(event, "vastai")
    assert ledger.receipt(T0 + 70) == [
        "lease 8001 (vastai, RTX 4090): destroyed, confirmed by the provider · 0:00:25 · "
        "$0.0018 (billed $0.0018)",
        "lease 8002 (vastai, RTX 3090): teardown NOT confirmed, still bills $0.300/h · "
        "0:01:10 · $0.0058 so far; end it with `mvp-tui down r-7f3a`",
        "run r-7f3a: 2 leases · $0.0076 · 1 may still bill",
    ]
    assert ledger.may_bill == ("8002",)


def test_provider_text_is_cleaned() -> None:
    ledger = fed([*created("8003", "a3", T0, 0.3, "RTX\x1b[31m 4090\n[b]x[/b]")])
    (line, _total) = ledger.receipt(T0 + 10)
    assert "\x1b" not in line and "\n" not in line and "RTX" in line


def test_a_node_that_destroyed_its_lease_stops_the_clock_until_confirmed() -> None:
    ledger = fed([*created("7003", "a1", T0, 0.36), running("7003", "a1", T0, 30, 0.36),
                  NodeWatchdog(at=T0 + 3600, run_id=RUN, status="destroyed",
                               trigger="deadline")])
    row = ledger.row("7003", T0 + 99_999)
    assert row is not None and row.state is Billing.NODE_GONE and row.may_bill
    assert row.uptime_s == 3600 and ledger.rate() == 0.0  # its word: not billing on
    assert "NOT confirmed by the provider" in ledger.receipt(T0 + 99_999)[0]
    ledger.apply(deleted("7003", T0, 3610, 0.36), "vastai")
    row = ledger.row("7003", T0 + 99_999)
    assert row is not None and row.state is Billing.DELETED and row.uptime_s == 3610


def test_a_volume_bills_by_the_month() -> None:
    ledger = fed([ev.VolumeMounted(at=T0, run_id=RUN, provider="runpod", volume_id="v1",
                                   name="mvp-cache", size_gb=50, data_center="EU-RO-1",
                                   usd_per_month=3.5)])
    assert ledger.volume_usd_per_month == 3.5


def test_the_tap_enters_each_event_before_passing_it_on() -> None:
    ledger, seen = LeaseLedger(), []

    def sink(event: EngineEvent) -> None:
        seen.append(ledger.row("7001", T0 + 10))  # the ledger has it already

    tap = LedgerTap(ledger, sink, "vastai")
    for event in created("7001", "a1", T0, 0.4):
        tap(event)
    assert seen[-1] is not None and seen[-1].provider == "vastai"


def test_the_record_rebuilds_the_same_figures(tmp_path: Path) -> None:
    """The engine writes each record before the event that tells of it: the ledger fed by
    the events and the one rebuilt from the record say the same."""
    store = RecordStore(tmp_path)
    record = store.create_run(RUN, provider="vastai", label_prefix="mvp", created_at=T0,
                              config={})

    def lease(pid: str, label: str, price: float, state: LeaseRecordState,
              created_at: float, deleted_at: float | None = None) -> LeaseRecord:
        return LeaseRecord(provider="vastai", label=label, node_id=1, offer_id="1",
                           gpu_name="RTX 3090", price_per_hour=price, state=state,
                           provider_id=pid, created_at=created_at, deleted_at=deleted_at,
                           deleted_by="mvp-tui" if deleted_at else None)

    record.leases += [
        lease("7001", "a1", 0.30, LeaseRecordState.DELETED, T0 + 1, T0 + 31),
        lease("7002", "a2", 0.40, LeaseRecordState.RUNNING, T0 + 41),
    ]
    store.save(record)
    events = [*created("7001", "a1", T0 + 1, 0.30), deleted("7001", T0 + 1, 30, 0.30),
              *created("7002", "a2", T0 + 41, 0.40), running("7002", "a2", T0 + 41, 180, 0.40)]
    live, rebuilt = fed(events), LeaseLedger.from_records([store.load(RUN)])
    now = T0 + 600
    assert rebuilt.receipt(now) == live.receipt(now)
    assert rebuilt.spent(now) == pytest.approx(live.spent(now))
    assert rebuilt.rate() == live.rate() == 0.40


def test_limits_read_the_ledger() -> None:
    ledger = fed([*created("7001", "a1", T0, 0.40), deleted("7001", T0, 3600, 0.40),
                  *created("7002", "a2", T0 + 3600, 0.80)])
    assert Limits(max_spend_usd=1.0).breach(ledger, T0 + 3600 + 1800) is None  # $0.80
    assert Limits(max_spend_usd=1.0).breach(ledger, T0 + 3600 + 2700) == (
        "max_spend_usd", 1.0, pytest.approx(1.0))
    assert Limits(max_hours=1.5).breach(ledger, T0 + 5000) is None  # oldest ran 1 h
    assert Limits(max_hours=1.5).breach(ledger, T0 + 3600 + 5400)[0] == "max_hours"  # type: ignore[index]
    assert Limits(max_spend_usd=0.5).breach(ledger, T0 + 9999, run_id="r-other") is None
