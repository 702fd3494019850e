"""The model picker over the real composed dashboard, as SVG snapshots: a repo's quants with
what each needs and the largest quant each kind of offer on the board holds (80x24, where
the two tables stack, and 160x48, side by side), a split quant as one row (refused, with
why) and a gated repo's error at 80x24. The hub is the fake (loopback), the board's offers
fixed, the theme dark, no cursor blink."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.model_picker import ModelPickerScreen
from mvp_tui.widgets.offers import OffersPane
from tests.fakes.hf_hub_server import FakeHfHub, picker_hub
from tests.tui.apps import make_app
from tests.widgets.data import offer, wait_until

RunBefore = Callable[[Pilot[None]], Awaitable[None]]


@pytest.fixture
def hub() -> Iterator[FakeHfHub]:
    with picker_hub() as fake:
        yield fake


def picker(
    hub: FakeHfHub, repo_row: int, then: tuple[str, ...] = (), until: str = ""
) -> RunBefore:
    """Search "llama", list the `repo_row`th repo (0: the most downloaded), press `then`
    and wait until the status line says `until`."""

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        app.hub_environ = {"MVP_HF_ENDPOINT": hub.url}
        pane = app.query_one(OffersPane)
        pane.set_offers([
            offer("2001", 0.110, "RTX 3060", vram_mib=12 * 1024),
            offer("2002", 0.260, "RTX 4090"),
            offer("2003", 0.310, "RTX 4090"),
            offer("2004", 0.190, "RTX 3090"),
            offer("2005", 0.520, "RTX A6000", vram_mib=48 * 1024),
            offer("2006", 1.650, "A100 SXM4", vram_mib=80 * 1024),
        ])
        pane.focus()
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPickerScreen))
        screen = app.screen
        screen.query_one(Input).cursor_blink = False
        await pilot.press(*"llama", "enter")
        repos = screen.query_one("#picker-repos", DataTable)
        await wait_until(pilot, lambda: repos.row_count == 3)
        await pilot.press(*["down"] * repo_row, "enter")
        status = screen.query_one(".picker-status", Static)
        quants = screen.query_one("#picker-quants", DataTable)
        await wait_until(pilot, lambda: quants.row_count > 0 or "gated" in str(status.render()))
        await pilot.press(*then)
        await wait_until(pilot, lambda: until in str(status.render()))
        app._exit_cleared = True  # the shell holds no engine: the snapshot's exit goes through
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_picker_quants_and_fit(snap_compare, hub: FakeHfHub, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=size, run_before=picker(hub, 0))


def test_picker_split_quant_refused(snap_compare, hub: FakeHfHub) -> None:  # type: ignore[no-untyped-def]
    run_before = picker(hub, 1, then=("down", "enter"), until="split into 2 files")
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_picker_gated_repo(snap_compare, hub: FakeHfHub) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=picker(hub, 2))
