"""The real composed dashboard with the board's `fit` and `~ready` (a 19 GB model: the 12 GB
card is dimmed and last, "✗ needs 19 GB"; a host that ran the image lately skips the pull),
the same board in an 80x24 terminal (the Offers pane has the screen, its least useful columns
dropped, never `$/h`, `fit` or `~ready`), and a zoomed pane. Fixed size, clock, theme, data.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC
from pathlib import Path

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream import ChannelHub
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, memory_from
from mvp_tui.providers.base import Offer
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.offer_board import BoardResult
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import Column
from tests.tui.apps import make_app
from tests.tui.fit_data import GIB
from tests.widgets.data import NOW, fixed_clock, offer, wait_until, walk_events

IMAGE = "ghcr.io/ggml-org/llama.cpp:full-cuda"
NEED = ModelNeed(model_bytes=16 * GIB, kv_bytes=GIB, context=8192)  # needs 19 GB


def offers() -> list[Offer]:
    rows = [
        offer("2001", 0.180, "RTX 3060", vram_mib=12 * 1024, down=900, where="Ohio, US"),
        offer("2002", 0.260, "RTX 4090", down=850, where="Texas, US"),
        offer("2003", 0.310, "RTX 4090", down=150, where="Bavaria, DE"),
        offer("2004", 0.390, "RTX 3090", down=2400, where="Quebec, CA"),
        offer("2005", 0.520, "RTX A6000", vram_mib=48 * 1024, down=600, where="Oslo, NO"),
    ]
    return [dataclasses.replace(o, machine_id=f"5{o.offer_id}") for o in rows]


def board_result(state: Path) -> BoardResult:
    journal = HostJournal(state)  # the 150 Mb/s host served this image an hour ago
    journal.append(HostOutcome(at=NOW - 3600, run_id="r-7f3a", provider="vastai", host="52003",
                               offer_id="2003", gpu_name="RTX 4090", stage="serving", ok=True,
                               reason="", image=IMAGE))
    memory = memory_from(journal.read(), NOW, 7)
    return BoardResult(offers=offers(), answered=["vastai"], memory=memory, read_at=NOW,
                       image=IMAGE, image_gb=3.6)


def _app() -> MvpApp:
    return make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(NOW), tz=UTC,
                    env={"MVP_PROVIDER": "vastai"})


def board(state: Path, *, zoom: str | None = None):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        result = board_result(state)
        pane = app.query_one(OffersPane)
        pane.need = NEED.describe()
        pane.update_offers(result.offers, providers=result.answered,
                           failures=result.failure_text, outlook=result.outlook(NEED))
        pane.focus()
        await pilot.pause()
        assert pane.table.keys[-1] == "vastai:2001"  # the cheapest, too small: last
        if zoom is not None:
            for event in walk_events():
                # through the real port: each fact to the pane that owns it
                app.dashboard.route(event)
            await pilot.pause()
            app.query_one(f"#{zoom}").focus()
            await pilot.press("z")
            await wait_until(pilot, lambda: app.screen.has_class("-solo"))
        app._exit_cleared = True  # the shell holds no engine: the snapshot's exit goes through
        await pilot.pause()

    return run_before


SIZES = [(80, 24), (100, 30), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "100x30", "160x48"])
def test_board_with_fit_and_ready(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(), terminal_size=size, run_before=board(tmp_path / "state"))


def test_a_zoomed_pane(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_before = board(tmp_path / "state", zoom="leases-pane")
    assert snap_compare(_app(), terminal_size=(100, 30), run_before=run_before)


async def test_zoom_and_back_and_the_palette(tmp_path: Path) -> None:
    app = _app()
    async with app.run_test(size=(160, 48)) as pilot:
        await board(tmp_path / "state")(pilot)
        assert not app.screen.has_class("-solo")
        app.query_one("#channels-pane").focus()
        await pilot.press("z")
        assert app.screen.has_class("-solo")
        assert [p.id for p in app.query(".-solo")] == ["channels-pane"]
        assert app.query_one(OffersPane).region.height == 0  # the others are off the screen
        await pilot.press("tab")  # zoomed: Tab brings the next pane up, still alone
        assert [p.id for p in app.query("Pane.-solo")] == ["prompt-pane"]
        await pilot.press("z")
        assert not app.screen.has_class("-solo")
        assert app.query_one(OffersPane).region.height > 0
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Zoom the focused pane (z)" in titles
        app._exit_cleared = True


async def test_a_narrow_board_keeps_price_fit_and_ready(tmp_path: Path) -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await board(tmp_path / "state")(pilot)
        pane = app.query_one(OffersPane)
        assert app.screen.has_class("-solo") and pane.has_class("-solo")  # the board's room
        shown = pane.table.shown_columns
        assert {Column.PRICE, Column.FIT, Column.READY, Column.GPU} <= set(shown)
        assert Column.UP not in shown and Column.PER_GIB not in shown
        assert pane.table.virtual_size.width <= pane.table.size.width  # nothing scrolls away
        app._exit_cleared = True
