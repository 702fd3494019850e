"""Host memory on the real dashboard: the board's search reads the journal under the state
dir, so an offer whose machine just failed is badged and listed after the others, and Enter
on the other Vast offer tries it first."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mvp_tui.engine.events import OffersListed
from mvp_tui.lease.host_journal import HostJournal, HostOutcome
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from mvp_tui.widgets.offers import OffersPane
from tests.fakes.vastai_server import FakeVast
from tests.tui.test_dashboard_run import dashboard, fake, is_, vast_env
from tests.widgets.data import wait_until

__all__ = ["fake"]  # the fixture, shared with the dashboard's run tests
REASON = "the engine never became healthy: CUDA error 999 (unknown error)"


def cheapest(fake: FakeVast) -> dict[str, Any]:
    return min(fake.offers(), key=lambda o: float(o["dph_total"]))


async def test_the_board_badges_a_host_that_just_failed_and_lists_it_last(
    fake: FakeVast, tmp_path: Path
) -> None:
    bad = cheapest(fake)
    HostJournal(tmp_path / "state").append(HostOutcome(
        at=time.time() - 600, run_id="r-earlier", provider="vastai",
        host=str(bad["machine_id"]), offer_id=str(bad["id"]), gpu_name=str(bad["gpu_name"]),
        stage="engine", ok=False, reason=REASON, stage_secs={"create": 1.0}, cost_usd=0.01,
    ))
    app, seen = dashboard(vast_env(fake, tmp_path), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        pane = app.query_one(OffersPane)
        await wait_until(pilot, lambda: pane.model.total == 3)  # this machine's offer too
        bad_key = f"vastai:{bad['id']}"
        view = pane.model.view()
        assert view[-1] == bad_key  # the cheapest Vast offer, yet last
        assert pane.model.row(bad_key).failed
        failure = pane.model.failure(bad_key)
        assert failure is not None and REASON in failure and "at engine" in failure
        pane.table.move_cursor(view.index(bad_key) - 1)  # the other Vast offer
        pane.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LeaseConfirmScreen)
        asked = [o.offer_id for o in app.screen.offers]  # what Enter rents, in order
        assert asked[0] != str(bad["id"]) and asked[-1] == str(bad["id"])
        await pilot.press("escape")
        await pilot.pause()
    assert fake.instances() == []
