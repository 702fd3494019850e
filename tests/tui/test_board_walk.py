"""Enter on the board, in the real dashboard against the fake Vast.ai server: without picks
it walks the focused offer then the next ones in the board's order (the confirm lists that
order); a sold offer is marked gone at once and the board re-read; the next offer is leased."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button

from mvp_tui.engine.events import OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.providers.base import Outcome
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from mvp_tui.widgets.offers import OffersPane
from tests.fakes.vastai_server import FakeVast
from tests.tui.test_dashboard_run import DISK_50_GB, KEY, dashboard, is_, vast_env
from tests.widgets.harness import screen_text


async def test_enter_on_a_sold_offer_leases_the_next_and_marks_it_gone(tmp_path: Path) -> None:
    with FakeVast(api_key=KEY) as fake:
        sold = fake.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        second = fake.add_offer(dph_total=0.45, gpu_name="RTX 4090")
        third = fake.add_offer(dph_total=0.60, gpu_name="A100 SXM4")
        fake.ssh_endpoint = ("127.0.0.1", 9, True)  # the node is never reached: torn down
        env = {**vast_env(fake, tmp_path), "MVP_LEASE_MAX_ATTEMPTS": "2"}
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed))
            await pilot.pause()
            pane = app.query_one(OffersPane)
            # The board also lists this machine (local, $0): the Vast offers follow it.
            keys = list(pane.table.keys)
            assert keys[keys.index(f"vastai:{sold}") + 1] == f"vastai:{second}"
            assert pane.table.move_cursor_to_key(f"vastai:{sold}")
            fake.remove_offer(sold)  # sold between the search and Enter
            await pilot.press("enter")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, LeaseConfirmScreen)
            # max_attempts = 2: the focused offer, then the next in the board's order.
            assert [o.offer_id for o in screen.offers] == [str(sold), str(second)]
            text = screen_text(app)
            assert text.index(f" {sold} ") < text.index(f" {second} ")
            assert f" {third} " not in text.split("tried in this order")[1]
            screen.query_one("#lease-go", Button).press()
            running = await seen.first(is_(lease.LeaseRunning), within=30)
            # The 4090's all-in $/h: its 0.45 with the 50 GB disk priced in.
            assert running.price_per_hour == pytest.approx(  # type: ignore[attr-defined]
                0.45 + DISK_50_GB, abs=1e-6)
            answered = [e for e in seen.events if isinstance(e, lease.AttemptAnswered)]
            assert [e.outcome for e in answered] == [Outcome.UNAVAILABLE.value, "created"]
            # The board is re-read behind the walk (a second search), without the sold offer.
            listed = [e for e in seen.events if isinstance(e, OffersListed)]
            await seen.first(lambda e: isinstance(e, OffersListed) and e is not listed[0])
            await seen.first(is_(lease.LeaseDeleted), within=30)
            await pilot.pause()
            assert f"vastai:{sold}" not in pane.table.keys
            assert f"vastai:{third}" in pane.table.keys
        assert fake.billing() == []
