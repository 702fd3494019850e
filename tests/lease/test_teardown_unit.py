from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseRecord, LeaseRecordState, RecordError, RecordStore, teardown
from mvp_tui.lease import events as ev
from mvp_tui.lease.settings import WalkSettings
from tests.lease.conftest import fast_settings
from tests.lease.scripted import Instance, ScriptedProvider

RUN = "r-7ea2"


def _running(store: RecordStore, provider: ScriptedProvider, pid: str = "7001") -> None:
    label = f"mvp-{RUN}-1-1"
    provider.instances[pid] = Instance(pid, label, "1001", 0)
    record = store.create_run(RUN, provider="scripted", label_prefix="mvp", created_at=0.0)
    record.leases.append(
        LeaseRecord(
            provider="scripted",
            label=label,
            node_id=1,
            offer_id="1001",
            gpu_name="RTX 4090",
            price_per_hour=0.36,
            state=LeaseRecordState.RUNNING,
            provider_id=pid,
            created_at=1000.0,
            running_at=1030.0,
        )
    )
    store.save(record)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_teardown_confirms_then_records_uptime_and_spend(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    _running(store, provider)
    settings = fast_settings()
    ok = await teardown(provider, store, RUN, "7001", sink, settings, clock=lambda: 1600.0)
    assert ok and provider.billing() == []
    (deleted,) = sink.of(ev.LeaseDeleted)
    assert deleted.uptime_s == 600.0  # type: ignore[attr-defined]
    assert deleted.spend_usd == pytest.approx(0.06)  # type: ignore[attr-defined]
    lease = store.load(RUN).leases[0]
    assert lease.state is LeaseRecordState.DELETED and lease.deleted_at == 1600.0
    assert provider.calls[-1] == ("get", "7001")  # claimed only after the provider said GONE


async def test_a_failing_destroy_is_retried_with_backoff(store: RecordStore) -> None:
    provider, sink, sleeps = ScriptedProvider(destroy_failures=2), RecordingSink(), Sleeps()
    _running(store, provider)
    settings = fast_settings(sleep=sleeps, destroy_backoff_s=1.0, destroy_backoff_max_s=30.0)
    assert await teardown(provider, store, RUN, "7001", sink, settings)
    assert provider.count("destroy") == 3
    assert sleeps.waits == [1.0, 2.0]
    assert provider.billing() == []


async def test_a_destroy_that_keeps_failing_is_reported_not_claimed(store: RecordStore) -> None:
    provider, sink, sleeps = ScriptedProvider(destroy_failures=99), RecordingSink(), Sleeps()
    _running(store, provider)
    settings = fast_settings(sleep=sleeps, destroy_attempts=4)
    assert not await teardown(provider, store, RUN, "7001", sink, settings)
    assert provider.count("destroy") == 4
    (unconfirmed,) = sink.of(ev.LeaseDeleteUnconfirmed)
    assert "destroy failed 4 times" in unconfirmed.reason  # type: ignore[attr-defined]
    assert "HTTP 500" in unconfirmed.reason  # type: ignore[attr-defined]
    assert not sink.of(ev.LeaseDeleted)
    lease = store.load(RUN).leases[0]
    assert lease.state is LeaseRecordState.DELETING and store.load(RUN).is_open


async def test_an_accepted_destroy_still_listed_is_not_claimed(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    _running(store, provider)
    provider.undeletable.add("7001")
    settings = fast_settings(delete_timeout_s=0.03)
    assert not await teardown(provider, store, RUN, "7001", sink, settings)
    (unconfirmed,) = sink.of(ev.LeaseDeleteUnconfirmed)
    assert "still listed" in unconfirmed.reason  # type: ignore[attr-defined]
    assert store.load(RUN).leases[0].state is LeaseRecordState.DELETING


async def test_an_already_gone_lease_is_confirmed(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    _running(store, provider)
    del provider.instances["7001"]  # e.g. the node's dead-man's switch destroyed it
    assert await teardown(provider, store, RUN, "7001", sink, fast_settings())
    assert store.load(RUN).leases[0].state is LeaseRecordState.DELETED


async def test_an_unknown_lease_is_named(store: RecordStore) -> None:
    provider = ScriptedProvider()
    _running(store, provider)
    with pytest.raises(RecordError, match="no lease '42'"):
        await teardown(provider, store, RUN, "42", RecordingSink(), fast_settings())


def test_the_destroy_back_off_is_configured_and_its_cap_scales_with_it(tmp_path: Path) -> None:
    """[lease] destroy_backoff_secs: the first wait after a refused destroy, doubling, capped
    at 16x it (the default's 1 s to 16 s); the fault tests run the same six refusals fast."""
    paths = ConfigPaths(default=tmp_path / "absent.toml")
    default = WalkSettings.from_config(load_config(env={}, paths=paths))
    assert [default.destroy_backoff(n) for n in range(1, 7)] == [1, 2, 4, 8, 16, 16]
    env = {"MVP_LEASE_DESTROY_BACKOFF_SECS": "0.05"}
    fast = WalkSettings.from_config(load_config(env=env, paths=paths))
    assert [fast.destroy_backoff(n) for n in range(1, 7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 0.8]
