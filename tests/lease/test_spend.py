from __future__ import annotations

import pytest

from mvp_tui.lease import LeaseRecord, LeaseRecordState, lease_spend_usd, lease_uptime_s
from mvp_tui.lease.spend import live_rate_per_hour, spend_usd, total_spend_usd


def _lease(price: float, created: float | None, deleted: float | None) -> LeaseRecord:
    state = LeaseRecordState.DELETED if deleted is not None else LeaseRecordState.RUNNING
    return LeaseRecord(
        provider="p",
        label="mvp-r-1-1-1",
        node_id=1,
        offer_id="1",
        gpu_name="g",
        price_per_hour=price,
        state=state,
        provider_id="7",
        created_at=created,
        deleted_at=deleted,
    )


def test_spend_is_price_times_uptime() -> None:
    assert spend_usd(0.36, 3600) == pytest.approx(0.36)
    assert spend_usd(0.36, 600) == pytest.approx(0.06)
    assert spend_usd(0.36, -5) == 0.0


def test_a_live_lease_runs_to_now_and_a_deleted_one_stops() -> None:
    live = _lease(0.5, created=1000.0, deleted=None)
    done = _lease(1.2, created=1000.0, deleted=1000.0 + 1800)
    assert lease_uptime_s(live, now=1000.0 + 7200) == 7200
    assert lease_spend_usd(live, now=1000.0 + 7200) == pytest.approx(1.0)
    assert lease_uptime_s(done, now=99999.0) == 1800
    assert lease_spend_usd(done, now=99999.0) == pytest.approx(0.6)
    assert total_spend_usd([live, done], now=1000.0 + 7200) == pytest.approx(1.6)
    assert live_rate_per_hour([live, done]) == pytest.approx(0.5)


def test_a_lease_never_created_costs_nothing() -> None:
    assert lease_uptime_s(_lease(1.0, created=None, deleted=None), now=5000.0) == 0.0
