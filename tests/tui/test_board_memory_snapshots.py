"""The real composed dashboard with a badged offer: the host memory (a journal under the
state dir) says one machine failed an hour ago, so its offer is marked `failed` and listed
after the others although it is the cheapest; `i` shows why. Fixed size, clock, theme, data.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC
from pathlib import Path

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream import ChannelHub
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, memory_from
from mvp_tui.providers.base import Offer
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.offer_board import BoardResult
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.offers import OffersPane
from tests.tui.apps import make_app
from tests.widgets.data import NOW, fixed_clock, small_offers, wait_until

SIZES = [(100, 30), (160, 48)]
SIZE_IDS = ["100x30", "160x48"]
FAILED_OFFER = "1004"  # the cheapest of small_offers()
REASON = "SSH refused after 12 tries: the host's sshd never answered"


def offers() -> list[Offer]:
    """The fixed offers, each on its own machine (as Vast's search answers them)."""
    return [dataclasses.replace(o, machine_id=f"4{o.offer_id}") for o in small_offers()]


def board_result(state: Path) -> BoardResult:
    """What the board's search hands the app: the offers and the memory read from a journal."""
    journal = HostJournal(state)
    journal.append(HostOutcome(
        at=NOW - 3600, run_id="r-7f3a", provider="vastai", host=f"4{FAILED_OFFER}",
        offer_id=FAILED_OFFER, gpu_name="RTX 3090", stage="ssh", ok=False, reason=REASON,
        stage_secs={"create": 1.2, "running": 41.0, "ssh": 120.0}, cost_usd=0.009,
    ))
    memory = memory_from(journal.read(), NOW, 7)
    return BoardResult(offers=offers(), answered=["vastai"], memory=memory, read_at=NOW)


def _app() -> MvpApp:
    return make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(NOW), tz=UTC,
                    env={"MVP_PROVIDER": "vastai"})


def board(state: Path, *, to_end: bool = False, detail: bool = False):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        result = board_result(state)
        pane = app.query_one(OffersPane)
        pane.update_offers(result.offers, providers=result.answered, failures=result.failure_text)
        pane.focus()
        await pilot.pause()
        assert pane.table.keys[-1] == f"vastai:{FAILED_OFFER}"
        if to_end or detail:  # the badged row, last, under the cursor
            await pilot.press("end")
        if detail:
            await pilot.press("i")
            await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen))
        app._exit_cleared = True  # the shell holds no engine: the snapshot's exit goes through
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_board_with_a_failed_host(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    # 100x30 shows five rows: the cursor goes to the last one, the badged offer.
    run_before = board(tmp_path / "state", to_end=size[0] < 160)
    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


def test_board_failed_host_detail(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_before = board(tmp_path / "state", detail=True)
    assert snap_compare(_app(), terminal_size=(100, 30), run_before=run_before)
