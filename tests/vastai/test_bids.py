"""Vast.ai interruptible leases (`[vastai] rental = "bid"`) against the fake over real HTTP:
offers priced at our bid (`min_bid` × `bid_factor`, capped), the create carrying `price`, the
instance read back (a silently on-demand one destroyed, confirmed, and the run stopped saying
so), a bid too low whose stopped instance is destroyed, confirmed, before the next offer; and
RunPod's spot refused with RunPod's own reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError, ConfigPaths, load_config
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore, WalkFailure
from mvp_tui.lease import events as ev
from mvp_tui.providers.base import LeaseState, SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast
from tests.lease.conftest import fast_settings


@pytest.fixture
async def bidder(fake: FakeVast) -> AsyncIterator[VastAiProvider]:
    client = VastAiProvider(api_key=fake.api_key, api_url=fake.url, timeout_s=2.0,
                            rate_limit_retries=2, rate_limit_base_delay_s=0.01,
                            rental="bid", bid_factor=1.2)
    yield client
    await client.aclose()


def _walk(provider: VastAiProvider, tmp_path: Path, sink: RecordingSink) -> LeaseWalk:
    return LeaseWalk(provider, RecordStore(tmp_path / "state"), sink, fast_settings())


async def test_offers_are_priced_at_our_bid_capped_and_the_create_carries_it(
    fake: FakeVast, bidder: VastAiProvider, tmp_path: Path
) -> None:
    fake.add_offer(dph_total=0.50, dph_base=0.48, min_bid=0.20)  # bid 0.24 + 0.02 storage
    fake.add_offer(dph_total=0.60, dph_base=0.60, min_bid=0.45)  # 0.54, capped at 0.50
    fake.add_offer(dph_total=0.70, dph_base=0.70, min_bid=0.55)  # floor over the cap: left out
    offers = await bidder.search_offers(SelectionPolicy(max_price_per_hour=0.50))
    (search,) = [r for r in fake.requests if r.path.startswith("/api/v0/bundles")]
    assert search.body["type"] == "bid" and search.body["min_bid"] == {"lte": 0.50}
    assert "dph_total" not in search.body  # the on-demand price is no limit for a bid
    assert [(o.bid_per_hour, o.price_per_hour) for o in offers] == [(0.24, 0.26), (0.5, 0.5)]
    assert all(o.bid for o in offers) and offers[0].on_demand_per_hour == 0.50

    sink = RecordingSink()
    result = await _walk(bidder, tmp_path, sink).run(offers[:1])
    assert result.ok, result.reason
    (put,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert put.body["price"] == 0.24  # absent, Vast would rent on demand without a word
    (row,) = fake.instances()
    assert row["is_bid"] is True and row["dph_base"] == 0.24


async def test_an_instance_made_on_demand_silently_is_destroyed_and_said(
    fake: FakeVast, bidder: VastAiProvider, tmp_path: Path
) -> None:
    fake.add_offer(dph_total=0.50, min_bid=0.20)
    fake.add_offer(dph_total=0.60, min_bid=0.30)
    fake.silent_on_demand = True  # vast-cli PR #403: the price ignored, on demand at dph_total
    offers = await bidder.search_offers(SelectionPolicy())
    sink = RecordingSink()
    result = await _walk(bidder, tmp_path, sink).run(offers)
    assert not result.ok and result.failure is WalkFailure.REJECTED
    # On demand at the offer's dph_total with the walk's 20 GB disk priced in (0.50 is at
    # Vast's default 8 GB; + 12 GB × 0.15 $/GB/month ÷ 730 h): the instance's own dph_total.
    assert "on demand (is_bid is not true) at 0.502 $/h although we bid 0.240 $/h" in (
        result.reason)
    assert "it is destroyed" in result.reason
    assert fake.billing() == []  # destroyed, confirmed
    (created,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert created.body["price"] == 0.24  # one create only: the run stopped there
    deleted = [e for e in sink.events if isinstance(e, ev.LeaseDeleted)]
    assert len(deleted) == 1


async def test_a_bid_too_low_leaves_a_stopped_instance_that_is_destroyed(
    fake: FakeVast, tmp_path: Path
) -> None:
    low = fake.add_offer(dph_total=0.40, min_bid=0.30)
    fake.add_offer(dph_total=0.50, min_bid=0.10)
    provider = VastAiProvider(api_key=fake.api_key, api_url=fake.url, timeout_s=2.0,
                              rental="bid")
    try:
        offers = await provider.search_offers(SelectionPolicy())
        # The floor rose between the search and the create: our bid is now under it.
        by_id = {o.offer_id: o for o in offers}
        assert by_id[str(low)].bid_per_hour == 0.30
        fake._offers[low]["min_bid"] = 0.35
        sink = RecordingSink()
        result = await _walk(provider, tmp_path, sink).run(
            [by_id[str(low)], *[o for o in offers if o.offer_id != str(low)]])
    finally:
        await provider.aclose()
    assert result.ok and result.lease is not None, result.reason
    stopped = next(e for e in sink.events if isinstance(e, ev.AttemptAnswered))
    assert stopped.outcome == "unavailable" and stopped.provider_id is not None
    assert "refused our bid of 0.300 $/h" in stopped.detail and "left instance" in stopped.detail
    assert fake.destroyed() == [int(stopped.provider_id)]  # before the next offer was tried
    deleted = next(e for e in sink.events if isinstance(e, ev.LeaseDeleted))
    assert deleted.provider_id == stopped.provider_id  # confirmed gone
    (live,) = fake.billing()
    assert live["is_bid"] is True and str(live["id"]) == result.lease.provider_id


async def test_an_outbid_instance_reads_as_stopped(
    fake: FakeVast, bidder: VastAiProvider
) -> None:
    fake.add_offer(min_bid=0.2)
    (offer,) = await bidder.search_offers(SelectionPolicy())
    instance = fake.add_instance(label="x", is_bid=True)
    fake.outbid(instance)
    fake.patch_instance(instance, actual_status="running")  # the container may lag behind
    status = await bidder.get(str(instance))
    assert status.state is LeaseState.STOPPED
    assert status.detail.startswith("outbid: Vast.ai paused this interruptible instance")
    assert offer.bid


def test_runpod_spot_is_refused_with_runpods_reason(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": "rp-key-0123",
           "MVP_RUNPOD_RENTAL": "spot", "MVP_STATE_DIR": str(tmp_path / "state")}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    with pytest.raises(ConfigError) as refused:
        build_provider(config)
    text = str(refused.value)
    assert 'RunPod no longer offers spot pods (its API answers 500 "Spot pods are no longer' in text
    assert '[vastai] rental = "bid"' in text and "env MVP_RUNPOD_RENTAL" in text
