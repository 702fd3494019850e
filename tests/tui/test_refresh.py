"""Background refresh (`[ui] offers_refresh_secs`): the board re-read in place with no key
pressed, and during a lease its current $/h re-read: a rise shows as a badge on the lease row
and one toast. On the rehearsal's simulated marketplace (the fake Vast.ai server)."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.rehearsal.session import build
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from tests.prompt.engine import require_engine
from tests.prompt.waiting import WaitingSink
from tests.tui.apps import FIXED_NOW, record_toasts
from tests.tui.test_dashboard_run import is_
from tests.tui.test_rehearse import _fresh_config
from tests.widgets.data import wait_until
from tests.widgets.harness import screen_text


async def test_board_refreshes_in_place_and_a_lease_price_rise_is_badged_once(
    tmp_path: Path,
) -> None:
    require_engine()
    config = _fresh_config(tmp_path / "home", refresh="0.3")
    seen = WaitingSink()
    rehearsal = build(config, [], tap=seen, clock=lambda: FIXED_NOW)
    app, market = rehearsal.app, rehearsal.market
    toasts = record_toasts(app)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed), within=30)
            await pilot.pause()
            pane = app.query_one(OffersPane)
            first = pane.table.cursor_key()
            added = market.add_offer(gpu_name="L40S", dph_total=0.05, geolocation="Oslo, NO")
            # No key pressed: the next refresh lists it (cheapest: first row), and the
            # cursor stays on the offer it was on.
            await wait_until(pilot, lambda: f"rehearsal:{added}" in pane.table.keys, 10)
            assert pane.table.keys[0] == f"rehearsal:{added}"
            assert pane.table.cursor_key() == first
            pane.table.move_cursor_to_key(f"rehearsal:{added}")
            await pilot.press("enter")
            await seen.first(is_(NodeReady), within=50)
            running = await seen.first(is_(lease.LeaseRunning))
            pid = running.provider_id  # type: ignore[attr-defined]
            market.patch_instance(int(pid), dph_total=0.09)  # the provider's price rose
            leases = app.query_one(LeasesPane)
            await wait_until(pilot, lambda: leases.model.leases[pid].current_price == 0.09, 10)
            await pilot.pause()
            assert "↑$0.09" in screen_text(app)
            rises = toasts.titled("price rise")
            assert len(rises) == 1 and "$0.090/h" in rises[0].message
            # Later refreshes see the same price: no second toast.
            def searches() -> int:
                return sum(isinstance(e, OffersListed) for e in seen.events)

            count = searches()
            await wait_until(pilot, lambda: searches() > count + 1, 10)
            assert len(toasts.titled("price rise")) == 1
            # The only L40S is the one leased: a re-lease would find none; said once.
            assert leases.model.leases[pid].out_of_stock
            assert "no stock" in screen_text(app)
            assert len(toasts.titled("out of stock")) == 1
            app.query_one(OffersPane).focus()
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")
            await seen.first(is_(lease.LeaseDeleted), within=30)
            await pilot.pause()
        assert market.billing() == []
    finally:
        rehearsal.close()
