"""Offer search against FakeVast: the query sent, units, client-side policy, bad rows."""

from __future__ import annotations

import pytest

from mvp_tui.providers.base import Offer, ProviderError, SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault


async def test_query_carries_every_policy_filter(fake: FakeVast, provider: VastAiProvider) -> None:
    policy = SelectionPolicy(
        gpu_name="RTX_4090",
        min_gpu_ram_mb=24000,
        min_down_mbps=500,
        min_up_mbps=100,
        min_reliability=0.98,
        require_verified=True,
        max_price_per_hour=0.6,
        limit=17,
    )
    await provider.search_offers(policy)

    (request,) = [r for r in fake.requests if r.path == "/api/v0/bundles/"]
    assert request.method == "POST"
    assert request.body == {
        "rentable": {"eq": True},
        "gpu_name": {"eq": "RTX 4090"},  # the CLI's underscore spelling becomes a space
        "gpu_ram": {"gte": 24000},
        "inet_down": {"gte": 500},
        "inet_up": {"gte": 100},
        "reliability2": {"gte": 0.98},
        "verified": {"eq": True},
        "dph_total": {"lte": 0.6},
        "order": [["dph_total", "asc"]],
        "type": "on-demand",
        "limit": 17,
    }


async def test_query_prices_the_disk_and_asks_for_the_image_cuda_floor(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """As vast-cli sends it: `allocated_storage` = the disk the create rents, so `dph_total`
    includes it; `cuda_max_good` and `disk_space` keep out hosts that cannot start the image
    or hold the disk (peers §1.1 V2-V4)."""
    fit = fake.add_offer(dph_total=0.30)
    fake.add_offer(dph_total=0.20, cuda_max_good=12.4)  # driver older than the image's CUDA
    fake.add_offer(dph_total=0.21, disk_space=40.0)  # no room for 50 GB

    offers = await provider.search_offers(SelectionPolicy(min_cuda=12.8, disk_gb=50))

    (request,) = [r for r in fake.requests if r.path == "/api/v0/bundles/"]
    assert request.body["allocated_storage"] == 50
    assert request.body["cuda_max_good"] == {"gte": 12.8}
    assert request.body["disk_space"] == {"gte": 50}
    assert [o.offer_id for o in offers] == [str(fit)]
    # 0.30 is its price at Vast's default 8 GB; 42 GB more at 0.15 $/GB/month over 730 h.
    assert offers[0].price_per_hour == pytest.approx(0.30 + 0.15 * 42 / 730)
    assert offers[0].refused == ""


async def test_a_host_the_server_lists_below_the_floor_is_kept_but_refused(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """A server that ignores the filters (or a row without the field) cannot slip a host
    past the client: the offer is listed with why it is never rented."""
    fake.unfiltered = {"cuda_max_good", "disk_space"}
    fit = fake.add_offer(dph_total=0.30)
    old = fake.add_offer(dph_total=0.20, cuda_max_good=12.4)
    small = fake.add_offer(dph_total=0.21, disk_space=40.0)
    unknown = fake.add_offer(dph_total=0.22, cuda_max_good=None)

    offers = await provider.search_offers(SelectionPolicy(min_cuda=12.8, disk_gb=50))

    refused = {o.offer_id: o.refused for o in offers}
    assert refused[str(fit)] == ""
    assert "cuda_max_good 12.4 < the image's CUDA floor 12.8" in refused[str(old)]
    assert "disk_space 40 GB < [vastai] disk_gb 50 GB" in refused[str(small)]
    assert "cuda_max_good unknown" in refused[str(unknown)]


async def test_offer_is_normalised_with_documented_units(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer_id = fake.add_offer(
        gpu_name="RTX 4090",
        num_gpus=2,
        gpu_ram=24564,
        dph_total=0.7042,
        reliability2=0.991,
        reliability=0.5,
        inet_down=812.3,
        inet_up=640.1,
        geolocation="Texas, US",
        cuda_max_good=12.8,
        host_id=55555,
        machine_id=88888,
        verification="verified",
        cpu_name="AMD EPYC 7543",
        cpu_ram=128785,
    )
    (offer,) = await provider.search_offers(SelectionPolicy())
    assert offer == Offer(
        provider="vastai",
        offer_id=str(offer_id),
        gpu_name="RTX 4090",
        num_gpus=2,
        gpu_ram_mib=24564,
        price_per_hour=0.7042,
        reliability=0.991,  # reliability2 wins over reliability
        down_mbps=812.3,
        up_mbps=640.1,
        location="Texas, US",
        cuda_max=12.8,
        host_id="55555",
        machine_id="88888",  # the machine (the host memory's key), not its owner
        verified=True,
        cpu="AMD EPYC 7543",
        ram_mib=128785,
        download_usd_per_gb=0.003,  # inet_down_cost: image pulls bill per GB, outside $/h
        mem_bw_gbps=908.1,  # gpu_mem_bw: what decode speed is bounded by
        disk_space_gb=512.0,  # disk_space: the host's free disk
    )
    assert offer.vram_gib_total == pytest.approx(2 * 24564 / 1024)


async def test_offers_come_cheapest_first_and_limited(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    for price in (0.9, 0.2, 0.5, 0.3):
        fake.add_offer(dph_total=price)
    offers = await provider.search_offers(SelectionPolicy(limit=3))
    assert [o.price_per_hour for o in offers] == [0.2, 0.3, 0.5]


async def test_policy_is_rechecked_when_the_server_ignores_filters(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """A server that ignores the query must not leak an offer outside the policy."""
    good = fake.add_offer(dph_total=0.4)
    fake.add_offer(dph_total=0.4, gpu_name="A100 PCIE")
    fake.add_offer(dph_total=0.9)  # over budget
    fake.add_offer(dph_total=0.4, gpu_ram=11264)
    fake.add_offer(dph_total=0.4, inet_down=50.0)
    fake.add_offer(dph_total=0.4, inet_up=5.0)
    fake.add_offer(dph_total=0.4, reliability2=0.5)
    fake.add_offer(dph_total=0.4, verification="unverified")
    every_offer = fake.offers()
    fake.script("search", Fault(status=200, body={"offers": every_offer}))

    policy = SelectionPolicy(
        gpu_name="rtx 4090",
        min_gpu_ram_mb=20000,
        min_down_mbps=100,
        min_up_mbps=50,
        min_reliability=0.9,
        require_verified=True,
        max_price_per_hour=0.5,
    )
    offers = await provider.search_offers(policy)

    assert [o.offer_id for o in offers] == [str(good)]
    reasons = " | ".join(provider.last_skipped)
    assert len(provider.last_skipped) == 7
    for needle in (
        "gpu_name 'A100 PCIE'",
        "dph_total 0.9 > max_price_per_hour 0.5",
        "gpu_ram 11264",
        "inet_down 50.0",
        "inet_up 5.0",
        "reliability 0.5",
        "not verified",
    ):
        assert needle in reasons


async def test_server_side_filters_really_apply(fake: FakeVast, provider: VastAiProvider) -> None:
    """The fake applies the query too, so the provider's filters are exercised end to end."""
    cheap = fake.add_offer(dph_total=0.3)
    fake.add_offer(dph_total=2.0)
    offers = await provider.search_offers(SelectionPolicy(max_price_per_hour=1.0))
    assert [o.offer_id for o in offers] == [str(cheap)]
    assert provider.last_skipped == []  # the server filtered: nothing to skip here


async def test_malformed_rows_are_skipped_with_a_reason(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    good = fake.add_offer(dph_total=0.3)
    rows = [
        *fake.offers(),
        {"id": 77, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24564},  # no price
        {"id": 78, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": "24 GB", "dph_total": 0.1},
        {"id": "x", "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 1, "dph_total": 0.1},
        {"id": 79, "gpu_name": "", "num_gpus": 1, "gpu_ram": 1, "dph_total": 0.1},
        {"id": 80, "gpu_name": "RTX 4090", "num_gpus": 0, "gpu_ram": 1, "dph_total": 0.1},
        {"id": 81, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 1, "dph_total": True},
        "not an object",
        None,
    ]
    fake.script("search", Fault(status=200, body={"offers": rows}))

    offers = await provider.search_offers(SelectionPolicy(require_verified=False))

    assert [o.offer_id for o in offers] == [str(good)]
    assert len(provider.last_skipped) == 8
    joined = "\n".join(provider.last_skipped)
    assert "id 77" in joined and "'dph_total' missing" in joined
    assert "id 78" in joined and "'gpu_ram' is not a number" in joined
    assert "'id' is not a positive integer" in joined
    assert "'gpu_name' missing or empty" in joined
    assert "'num_gpus' is not a positive integer" in joined
    assert "row is not a JSON object" in joined


async def test_untrusted_offer_text_is_sanitised(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.add_offer(gpu_name="RTX 4090", geolocation="\x1b[31mTexas\x1b]0;pwned\x07, US\r\n")
    (offer,) = await provider.search_offers(SelectionPolicy(require_verified=False))
    assert offer.location == "Texas, US"
    assert "\x1b" not in offer.location


async def test_answer_without_offer_list_is_a_clear_error(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    fake.script("search", Fault(status=200, body="<html>maintenance</html>"))
    with pytest.raises(ProviderError) as info:
        await provider.search_offers(SelectionPolicy())
    assert "no offer list" in str(info.value)
    assert "maintenance" in str(info.value)
    assert info.value.fix


async def test_search_server_error_raises_with_status(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    fake.script("search", Fault(status=502, body="Bad Gateway"))
    with pytest.raises(ProviderError) as info:
        await provider.search_offers(SelectionPolicy())
    assert info.value.http_status == 502
    assert "Bad Gateway" in str(info.value)


async def test_search_rate_limit_is_retried_then_succeeds(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    fake.add_offer()
    fake.rate_limit("search", 2)
    offers = await provider.search_offers(SelectionPolicy())
    assert len(offers) == 1
    assert [r.path for r in fake.requests].count("/api/v0/bundles/") == 3
