"""The board's $/h for Vast is all-in for the first hour: Vast bills image pulls per GB
(`inet_down_cost`) outside `dph_total`, so the image's size ([image] size_gb) is priced in."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.offer_columns import Column
from mvp_tui.engine.outlook import NO_OUTLOOK
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.rehearsal.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"


async def test_the_image_pull_is_priced_into_each_offer(tmp_path: Path) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.30, inet_down_cost=0.02)  # $0.02 per GB pulled
        fake.add_offer(dph_total=0.31, inet_down_cost=0.0)
        env = {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY,
               "MVP_VASTAI_API_URL": fake.url, "MVP_IMAGE_SIZE_GB": "6.5"}
        provider = build_provider(load_config(env=env, paths=ConfigPaths(default=tmp_path / "x")))
        assert isinstance(provider, VastAiProvider)
        try:
            offers = await provider.search_offers(SelectionPolicy())
        finally:
            await provider.aclose()
    by_rate = {o.price_per_hour: o for o in offers}
    pulled, free = by_rate[0.30], by_rate[0.31]
    assert pulled.pull_usd == pytest.approx(0.13) and free.pull_usd == 0.0
    assert pulled.price_per_hour == 0.30  # the billing rate (limits, spend) is unchanged
    # On the board the first hour of the "cheaper" offer costs more: it leads no more.
    price = Column.PRICE.spec
    assert price.cell(pulled, NO_OUTLOOK) == "0.430" and price.cell(free, NO_OUTLOOK) == "0.310"


async def test_without_an_image_size_nothing_is_added(tmp_path: Path) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.30, inet_down_cost=0.02)
        provider = VastAiProvider(api_key=KEY, api_url=fake.url)
        try:
            (offer,) = await provider.search_offers(SelectionPolicy())
        finally:
            await provider.aclose()
    assert offer.download_usd_per_gb == 0.02 and offer.all_in_per_hour == 0.30
