from __future__ import annotations

from mvp_tui.events import RecordingSink
from mvp_tui.lease import (
    AttemptRecord,
    LeaseRecord,
    LeaseRecordState,
    RecordStore,
    down,
    reconcile_open_runs,
)
from tests.lease.conftest import TAG, fast_settings
from tests.lease.scripted import Instance, ScriptedProvider


def _run(
    store: RecordStore,
    run_id: str,
    pid: str | None,
    state: LeaseRecordState,
    provider: str = "scripted",
) -> str:
    label = f"mvp-{run_id}-1-1"
    record = store.create_run(run_id, provider=provider, label_prefix="mvp", created_at=0.0)
    record.attempts.append(
        AttemptRecord(
            label=label,
            node_id=1,
            number=1,
            offer_id="1",
            gpu_name="g",
            price_per_hour=0.3,
            started_at=1.0,
        )
    )
    record.leases.append(
        LeaseRecord(
            provider=provider,
            label=label,
            node_id=1,
            offer_id="1",
            gpu_name="g",
            price_per_hour=0.3,
            state=state,
            provider_id=pid,
            created_at=None if pid is None else 2.0,
        )
    )
    store.save(record)
    return label


async def test_reconcile_reports_what_still_exists(store: RecordStore) -> None:
    provider = ScriptedProvider()
    live = _run(store, "r-01", "7001", LeaseRecordState.RUNNING)
    provider.instances["7001"] = Instance("7001", live, "1", 0)
    _run(store, "r-02", "7002", LeaseRecordState.RUNNING)  # destroyed meanwhile
    _run(store, "r-03", "7003", LeaseRecordState.DELETED)  # closed run: not asked about
    _run(store, "r-04", "9", LeaseRecordState.RUNNING, provider="other")  # other provider
    found = await reconcile_open_runs(provider, store)
    assert [(f.run_id, f.lease.provider_id, f.exists) for f in found] == [
        ("r-01", "7001", True),
        ("r-02", "7002", False),
    ]
    assert not store.load("r-02").is_open  # the provider confirmed it gone
    assert store.load("r-01").is_open


async def test_reconcile_finds_a_create_whose_answer_was_never_recorded(
    store: RecordStore,
) -> None:
    provider = ScriptedProvider()
    label = _run(store, "r-01", None, LeaseRecordState.CREATING)  # killed mid-create
    provider.instances["7005"] = Instance("7005", label, "1", 0)
    provider.instances["7006"] = Instance("7006", "mvp-r-010-1-1", "1", 0)  # run r-010's
    (found,) = await reconcile_open_runs(provider, store)
    assert found.exists and found.lease.provider_id == "7005"
    assert store.load("r-01").leases[0].provider_id == "7005"


async def test_down_all_destroys_every_open_lease_confirmed(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    a = _run(store, "r-01", "7001", LeaseRecordState.RUNNING)
    b = _run(store, "r-02", None, LeaseRecordState.UNKNOWN)
    _run(store, "r-03", None, LeaseRecordState.UNKNOWN)
    provider.instances["7001"] = Instance("7001", a, "1", 0)
    provider.instances["7002"] = Instance("7002", b, "1", 0)
    # An untracked stray of this install (its tag); untagged, no record would hold it.
    provider.instances["7009"] = Instance("7009", f"mvp-{TAG}-r-01-2-1", "1", 0)
    report = await down(provider, store, None, sink, fast_settings())
    assert report.ok
    assert sorted((r.run_id, r.provider_id) for r in report.confirmed) == [
        ("r-01", "7001"),
        ("r-01", "7009"),
        ("r-02", "7002"),
    ]
    assert provider.billing() == []
    assert store.open_runs() == []
    assert store.load("r-03").leases == []  # the listing showed nothing for it


async def test_down_reports_what_it_cannot_confirm(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(list_fails=True), RecordingSink()
    a = _run(store, "r-01", "7001", LeaseRecordState.RUNNING)
    _run(store, "r-02", None, LeaseRecordState.UNKNOWN)
    provider.instances["7001"] = Instance("7001", a, "1", 0)
    provider.undeletable.add("7001")
    report = await down(provider, store, None, sink, fast_settings(delete_timeout_s=0.02))
    assert not report.ok
    assert {(r.run_id, r.provider_id) for r in report.unconfirmed} == {
        ("r-01", "7001"),
        ("r-02", None),
    }
    assert all(r.reason for r in report.unconfirmed)
    assert {r.run_id for r in store.open_runs()} == {"r-01", "r-02"}


async def test_down_one_run_leaves_the_others(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    a = _run(store, "r-01", "7001", LeaseRecordState.RUNNING)
    b = _run(store, "r-02", "7002", LeaseRecordState.RUNNING)
    provider.instances["7001"] = Instance("7001", a, "1", 0)
    provider.instances["7002"] = Instance("7002", b, "1", 0)
    report = await down(provider, store, "r-01", sink, fast_settings())
    assert report.ok and provider.billing() == ["7002"]
    missing = await down(provider, store, "r-99", sink, fast_settings())
    assert not missing.ok and "no such record" in missing.errors[0]


async def test_down_names_a_corrupt_record(store: RecordStore) -> None:
    provider = ScriptedProvider()
    _run(store, "r-01", "7001", LeaseRecordState.RUNNING)
    store.record_path("r-01").write_text("{")
    report = await down(provider, store, None, RecordingSink(), fast_settings())
    assert not report.ok and "r-01" in report.errors[0]


async def test_a_lagging_listing_never_turns_an_unclear_create_into_none(
    store: RecordStore,
) -> None:
    """Issue 36 §5: the create's answer was lost and the first listing does not show the
    instance yet; it is listed again after the reconcile waits, found, and destroyed."""
    provider = ScriptedProvider()
    label = _run(store, "r-01", None, LeaseRecordState.UNKNOWN)
    provider.instances["7005"] = Instance("7005", label, "1", 0)
    provider.hidden_lists = 1  # the listing lags behind the create
    report = await down(provider, store, None, RecordingSink(), fast_settings())
    assert report.ok
    assert provider.destroyed == ["7005"] and provider.instances == {}
    assert [(r.run_id, r.provider_id) for r in report.confirmed] == [("r-01", "7005")]


async def test_an_unclear_create_is_forgotten_only_when_repeated_listings_agree(
    store: RecordStore,
) -> None:
    provider = ScriptedProvider()
    _run(store, "r-01", None, LeaseRecordState.UNKNOWN)  # no instance was ever made
    settings = fast_settings(reconcile_waits_s=(0.0, 0.01))
    report = await down(provider, store, None, RecordingSink(), settings)
    assert report.ok and not store.load("r-01").is_open
    lists = [c for c in provider.calls if c[0] == "list"]
    assert len(lists) == 3, "the first listing and one after each wait agreed"


async def test_an_unclear_create_stays_may_exist_when_a_later_listing_fails(
    store: RecordStore,
) -> None:
    provider = ScriptedProvider()
    _run(store, "r-01", None, LeaseRecordState.UNKNOWN)
    provider.hidden_lists = 1

    async def then_fail(_wait: float) -> None:
        provider.list_fails = True

    report = await down(provider, store, None, RecordingSink(), fast_settings(sleep=then_fail))
    assert not report.ok
    assert store.load("r-01").is_open, "a lease that may exist is never forgotten"
