"""The must-show cases: the walk against the real VastAiProvider and FakeVast over HTTP.

Every test ends with the fake billing nothing (unless it keeps a lease on purpose and then
tears it down) and the API key nowhere in the state directory or the events.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mvp_tui.events import EngineEvent, RecordingSink
from mvp_tui.lease import (
    LeaseRecordState,
    LeaseWalk,
    RecordStore,
    WalkFailure,
    WalkResult,
    down,
    teardown,
)
from mvp_tui.lease import events as ev
from mvp_tui.providers.base import Offer, SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault
from tests.lease.conftest import fast_settings

REPO = Path(__file__).resolve().parents[2]
EMPTY_LIST = {
    "success": True,
    "instances_found": 0,
    "total_instances": 0,
    "label_counts": {},
    "next_token": None,
    "instances": [],
}


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with FakeVast(loading_polls=1) as server:
        yield server


def _provider(fake: FakeVast, api_key: str | None = None) -> VastAiProvider:
    return VastAiProvider(
        api_key=api_key or fake.api_key,
        api_url=fake.url,
        timeout_s=5.0,
        rate_limit_retries=2,
        rate_limit_base_delay_s=0.01,
    )


@pytest.fixture
async def vast(fake: FakeVast) -> AsyncIterator[VastAiProvider]:
    provider = _provider(fake)
    yield provider
    await provider.aclose()


async def _offers(fake: FakeVast, vast: VastAiProvider, prices: list[float]) -> list[Offer]:
    for price in prices:
        fake.add_offer(dph_total=price)
    offers = await vast.search_offers(SelectionPolicy())
    assert [o.price_per_hour for o in offers] == sorted(prices)
    return offers


async def _walk(
    vast: VastAiProvider, store: RecordStore, sink: RecordingSink, offers: list[Offer], **kw: object
) -> WalkResult:
    return await LeaseWalk(vast, store, sink, fast_settings(**kw)).run(offers)


def _creates(fake: FakeVast) -> int:
    return sum(1 for r in fake.requests if r.method == "PUT" and "/asks/" in r.path)


def _deletes(fake: FakeVast) -> int:
    return sum(1 for r in fake.requests if r.method == "DELETE")


def _assert_clean(fake: FakeVast, store: RecordStore, *outputs: str) -> None:
    """Nothing bills, and the API key is in no file of the state dir and no output."""
    assert fake.billing() == []
    files = [p for p in store.state_dir.rglob("*") if p.is_file()]
    assert files, "the walk wrote no record"
    for path in files:
        assert fake.api_key not in path.read_text(errors="replace"), path
    for text in outputs:
        assert fake.api_key not in text


def _lines(sink: RecordingSink) -> str:
    return "\n".join(e.to_json() for e in sink.events)


async def _teardown_kept(
    vast: VastAiProvider, store: RecordStore, result: WalkResult, sink: RecordingSink
) -> None:
    assert result.lease is not None and result.lease.provider_id is not None
    ok = await teardown(vast, store, result.run_id, result.lease.provider_id, sink, fast_settings())
    assert ok


async def test_an_offer_gone_before_create_moves_to_the_next(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    first, second = await _offers(fake, vast, [0.30, 0.40])
    fake.remove_offer(int(first.offer_id))  # sold between the listing and the create
    result = await _walk(vast, store, sink, [first, second])
    assert result.ok and result.lease is not None
    assert result.lease.offer_id == second.offer_id
    answered = sink.of(ev.AttemptAnswered)
    assert [(e.outcome, e.http_status) for e in answered] == [  # type: ignore[attr-defined]
        ("unavailable", 404),
        ("created", 200),
    ]
    assert result.endpoint is not None and result.endpoint.host == "127.0.0.1"
    assert len(fake.billing()) == 1  # the lease kept on purpose
    await _teardown_kept(vast, store, result, sink)
    _assert_clean(fake, store, _lines(sink))


async def test_a_500_whose_create_happened_is_adopted_not_duplicated(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    offers = await _offers(fake, vast, [0.30, 0.40])
    fake.script("create", Fault(status=500, perform=True))
    result = await _walk(vast, store, sink, offers)
    assert result.ok and result.lease is not None
    assert _creates(fake) == 1
    (only,) = fake.instances()
    assert str(only["id"]) == result.lease.provider_id
    assert only["label"] == result.lease.label
    (reconciled,) = sink.of(ev.Reconciled)
    assert reconciled.adopted_id == str(only["id"])  # type: ignore[attr-defined]
    await _teardown_kept(vast, store, result, sink)
    _assert_clean(fake, store, _lines(sink))


async def test_two_unclear_creates_that_both_made_instances_keep_one(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    (offer,) = await _offers(fake, vast, [0.30])
    relisted: list[int] = []

    def sink_and_relist(event: EngineEvent) -> None:
        # Vast can sell one offer twice (reference §3): list it again after the first buy.
        sink(event)
        if isinstance(event, ev.AttemptAnswered) and not relisted:
            relisted.append(fake.add_offer(id=int(offer.offer_id), dph_total=0.30))

    sink = RecordingSink()
    fake.script("create", Fault(status=500, perform=True), Fault(status=502, perform=True))
    fake.script("list", Fault(status=200, body=EMPTY_LIST), Fault(status=200, body=EMPTY_LIST))
    result = await LeaseWalk(vast, store, sink_and_relist, fast_settings()).run([offer])
    assert result.ok and result.lease is not None
    assert _creates(fake) == 2
    first_id, second_id = sorted(fake.destroyed() + [int(i["id"]) for i in fake.instances()])
    assert fake.destroyed() == [first_id]  # the first attempt's instance: a duplicate
    assert result.lease.provider_id == str(second_id)  # the one with the second label
    reconciled = sink.of(ev.Reconciled)
    assert [r.adopted_id for r in reconciled] == [None, str(second_id)]  # type: ignore[attr-defined]
    assert reconciled[1].destroyed == (str(first_id),)  # type: ignore[attr-defined]
    record = store.load(result.run_id)
    dup = record.lease_by_id(str(first_id))
    assert dup is not None and dup.state is LeaseRecordState.DELETED
    await _teardown_kept(vast, store, result, sink)
    _assert_clean(fake, store, _lines(sink))


async def test_a_lease_stuck_loading_is_destroyed_and_the_next_tried(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    first, second = await _offers(fake, vast, [0.30, 0.40])
    fake.stick_loading(int(first.offer_id))
    result = await _walk(vast, store, sink, [first, second], ready_timeout_s=0.2)
    assert result.ok and result.lease is not None
    assert result.lease.offer_id == second.offer_id
    (not_ready,) = sink.of(ev.LeaseNotReady)
    assert "loading" in not_ready.reason  # type: ignore[attr-defined]
    (deleted,) = sink.of(ev.LeaseDeleted)
    assert int(deleted.provider_id) in fake.destroyed()  # type: ignore[attr-defined]
    await _teardown_kept(vast, store, result, sink)
    _assert_clean(fake, store, _lines(sink))


async def test_a_lease_that_dies_on_start_is_destroyed_at_once(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    first, second = await _offers(fake, vast, [0.30, 0.40])
    fake.die_on_start(int(first.offer_id))
    result = await _walk(vast, store, sink, [first, second], ready_timeout_s=30.0)
    assert result.ok and result.lease is not None and result.lease.offer_id == second.offer_id
    (not_ready,) = sink.of(ev.LeaseNotReady)
    assert "exited" in not_ready.reason  # type: ignore[attr-defined]
    await _teardown_kept(vast, store, result, sink)
    _assert_clean(fake, store, _lines(sink))


async def test_a_destroy_failing_twice_is_retried_and_confirmed(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    offers = await _offers(fake, vast, [0.30])
    result = await _walk(vast, store, sink, offers)
    assert result.ok and result.lease is not None and result.lease.provider_id
    fake.fail_destroy(None, 2)
    ok = await teardown(vast, store, result.run_id, result.lease.provider_id, sink, fast_settings())
    assert ok and _deletes(fake) == 3
    (deleted,) = sink.of(ev.LeaseDeleted)
    assert deleted.uptime_s >= 0 and deleted.spend_usd >= 0  # type: ignore[attr-defined]
    assert store.load(result.run_id).is_open is False
    _assert_clean(fake, store, _lines(sink))


async def test_a_destroy_failing_for_good_is_reported_and_kept_in_the_record(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    sink = RecordingSink()
    offers = await _offers(fake, vast, [0.30])
    result = await _walk(vast, store, sink, offers)
    assert result.lease is not None and result.lease.provider_id
    fake.fail_destroy(None, 3)
    settings = fast_settings(destroy_attempts=3)
    ok = await teardown(vast, store, result.run_id, result.lease.provider_id, sink, settings)
    assert not ok and len(fake.billing()) == 1
    assert sink.of(ev.LeaseDeleteUnconfirmed) and not sink.of(ev.LeaseDeleted)
    assert [r.run_id for r in store.open_runs()] == [result.run_id]
    # The three failures are spent: the provider recovered, and `down` finishes the job.
    report = await down(vast, store, result.run_id, sink, fast_settings())
    assert report.ok
    _assert_clean(fake, store, _lines(sink))


@pytest.mark.parametrize(
    ("setup", "failure", "words"),
    [
        ("rejected", WalkFailure.REJECTED, "Invalid args"),
        ("no_credits", WalkFailure.NO_CREDITS, "balance is too low"),
        ("auth", WalkFailure.AUTH_FAILED, "api_key"),
    ],
)
async def test_stop_answers_end_the_walk_with_the_reason(
    fake: FakeVast,
    vast: VastAiProvider,
    store: RecordStore,
    setup: str,
    failure: WalkFailure,
    words: str,
) -> None:
    sink = RecordingSink()
    offers = await _offers(fake, vast, [0.30, 0.40])
    walker = vast
    if setup == "rejected":
        fake.script("create", Fault(status=400))
    elif setup == "no_credits":
        fake.credit = 0.0
    else:
        walker = _provider(fake, api_key="not-the-right-key-0000000")
    try:
        result = await _walk(walker, store, sink, offers)
    finally:
        if walker is not vast:
            await walker.aclose()
    assert result.failure is failure
    assert words in result.reason, result.reason
    assert _creates(fake) == 1  # the second offer was never tried
    (failed,) = sink.of(ev.WalkFailed)
    assert failed.failure is failure  # type: ignore[attr-defined]
    assert not store.load(result.run_id).is_open
    _assert_clean(fake, store, _lines(sink), result.reason)


async def test_a_walk_killed_after_create_is_torn_down_from_its_record(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    (offer,) = await _offers(fake, vast, [0.30])
    fake.stick_loading(int(offer.offer_id))  # the child keeps waiting for running
    run_id = "r-c0ffee01"
    env = {**os.environ, "MVP_TEST_VAST_KEY": fake.api_key, "PYTHONUNBUFFERED": "1"}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.lease.walk_child", fake.url, str(store.state_dir), run_id,
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    output: list[str] = []
    try:
        async with asyncio.timeout(30):
            while True:
                raw = await child.stdout.readline()
                if not raw:
                    err = (await child.stderr.read()).decode()
                    pytest.fail(f"the walk child ended early: {err[-2000:]}")
                line = raw.decode()
                output.append(line)
                event = json.loads(line)
                if event["event"] == "attempt_answered" and event["outcome"] == "created":
                    break
        child.send_signal(signal.SIGKILL)
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    assert len(fake.billing()) == 1  # the killed walk left a billing instance behind

    sink = RecordingSink()
    report = await down(vast, store, None, sink, fast_settings())
    assert report.ok
    (gone,) = report.confirmed
    assert gone.run_id == run_id and gone.provider_id == str(fake.destroyed()[0])
    _assert_clean(fake, store, "".join(output), _lines(sink))


async def test_a_walk_killed_before_the_answer_was_recorded_is_found_by_label(
    fake: FakeVast, vast: VastAiProvider, store: RecordStore
) -> None:
    """A crash between the create call and its record: the placeholder's label finds it."""
    offers = await _offers(fake, vast, [0.30])
    fake.script("create", Fault(status=500, perform=True, drop=True))
    sink = RecordingSink()
    walk = LeaseWalk(vast, store, sink, fast_settings())
    result = await walk.run(offers)  # dropped answer, adopted by label
    assert result.lease is not None and _creates(fake) == 1
    # Now pretend the process died before the answer reached the record.
    record = store.load(walk.run_id)
    lease = record.leases[0]
    lease.provider_id, lease.state = None, LeaseRecordState.CREATING
    store.save(record)
    report = await down(vast, store, None, sink, fast_settings())
    assert report.ok and [r.label for r in report.confirmed] == [lease.label]
    _assert_clean(fake, store, _lines(sink))
