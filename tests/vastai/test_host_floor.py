"""Hosts that cannot run the image or hold the disk are never rented, and the spend ledger
bills what the instance itself reports (peers 2026-12-07 §1.1 V2-V4), against FakeVast."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore
from mvp_tui.lease import events as ev
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast
from tests.lease.conftest import fast_settings

FLOOR = SelectionPolicy(min_cuda=12.8, disk_gb=20)


def _walk(provider: VastAiProvider, tmp_path: Path, sink: RecordingSink) -> LeaseWalk:
    return LeaseWalk(provider, RecordStore(tmp_path / "state"), sink, fast_settings())


def _creates(fake: FakeVast) -> list[int]:
    return [int(r.path.rstrip("/").split("/")[-1]) for r in fake.requests
            if r.method == "PUT" and "/asks/" in r.path]


async def test_an_offer_below_the_cuda_floor_is_never_created(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    """Even first in the walk's order (cheapest), a host whose driver is older than the
    image's CUDA, or with too little disk, is skipped with its reason; the walk rents the
    next one."""
    fake.unfiltered = {"cuda_max_good", "disk_space"}  # a server that lets them through
    old = fake.add_offer(dph_total=0.10, cuda_max_good=12.4)
    small = fake.add_offer(dph_total=0.11, disk_space=12.0)
    fit = fake.add_offer(dph_total=0.30)
    offers = await provider.search_offers(FLOOR)
    assert [o.offer_id for o in offers] == [str(old), str(small), str(fit)]

    sink = RecordingSink()
    result = await _walk(provider, tmp_path, sink).run(offers)

    assert result.ok, result.reason
    assert _creates(fake) == [fit]
    skipped = {e.offer_id: e.reason for e in sink.of(ev.OfferSkipped)}  # type: ignore[attr-defined]
    assert "cuda_max_good 12.4 < the image's CUDA floor 12.8" in skipped[str(old)]
    assert "disk_space 12 GB < [vastai] disk_gb 20 GB" in skipped[str(small)]


async def test_a_walk_of_only_unfit_hosts_rents_nothing(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    fake.unfiltered = {"cuda_max_good"}
    fake.add_offer(dph_total=0.10, cuda_max_good=11.8)
    offers = await provider.search_offers(FLOOR)

    result = await _walk(provider, tmp_path, RecordingSink()).run(offers)

    assert not result.ok
    assert _creates(fake) == []
    assert fake.billing() == []


async def test_the_ledger_bills_the_instance_dph_total_not_the_offer(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    """The offer was searched without its disk priced in (an old board, or a search at
    another disk): once the instance reports its own `dph_total`, the ledger bills that."""
    fake.loading_polls = 2  # a pending read or two before it runs
    fake.add_offer(dph_total=0.30)
    (offer,) = await provider.search_offers(SelectionPolicy())  # at Vast's default 8 GB
    sink = RecordingSink()

    result = await _walk(provider, tmp_path, sink).run([offer])

    assert result.ok, result.reason
    (row,) = fake.instances()
    own = row["dph_total"]
    assert own == pytest.approx(0.30 + 0.15 * (20 - 8) / 730)  # its 20 GB disk billed
    assert own != offer.price_per_hour
    ledger = LeaseLedger()
    pending_seen = False
    for event in sink.events:
        ledger.apply(event, "vastai")
        if isinstance(event, ev.LeasePending) and not pending_seen:
            pending_seen = True
            # Already while it loads: the instance's rate, not the offer's.
            (line,) = ledger.rows(event.at)
            assert line.price_per_hour == pytest.approx(own)
    assert pending_seen
    (line,) = ledger.rows(0.0)
    assert line.price_per_hour == pytest.approx(own)
