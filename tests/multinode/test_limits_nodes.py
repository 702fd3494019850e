"""Spend and hour limits count every node of a multi-node run, not only the main one: the
ledger holds every lease of the run (the workers' and the main's)."""

from __future__ import annotations

from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.limits import Limits
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RunRecord


def _lease(node: int, price: float, running_at: float) -> LeaseRecord:
    return LeaseRecord(
        provider="vastai", label=f"l-{node}", node_id=node, offer_id="1", gpu_name="g",
        price_per_hour=price, state=LeaseRecordState.RUNNING, provider_id=str(node),
        created_at=running_at, running_at=running_at,
    )


def _ledger(*leases: LeaseRecord) -> LeaseLedger:
    record = RunRecord(run_id="r-1", provider="vastai", label_prefix="mvp", created_at=0.0)
    record.leases += leases
    return LeaseLedger.from_records([record])


def test_spend_adds_up_over_the_workers() -> None:
    limits = Limits(max_spend_usd=1.0)
    main, worker = _lease(1, 1.0, 3600.0), _lease(2, 1.0, 3600.0)
    now = 3600.0 + 1800.0  # half an hour: 0.5 USD each
    assert limits.breach(_ledger(main), now) is None
    limit, value, reached = limits.breach(_ledger(main, worker), now, "r-1") or ("", 0.0, 0.0)
    assert (limit, value) == ("max_spend_usd", 1.0) and abs(reached - 1.0) < 1e-9


def test_hours_run_from_the_oldest_lease() -> None:
    limits = Limits(max_hours=1.0)
    main, worker = _lease(1, 0.1, 1000.0), _lease(2, 0.1, 0.0)  # the worker came first
    assert limits.breach(_ledger(main), 3600.0) is None
    assert limits.breach(_ledger(main, worker), 3600.0) == ("max_hours", 1.0, 1.0)
