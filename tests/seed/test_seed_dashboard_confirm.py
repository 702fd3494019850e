"""The dashboard's lease confirm follows `[vastai] confirm_lease`: it asks unless the key is
false (then Enter rents at once, as the seed's `confirm_lease = false` does). The real
composed app against the fake Vast API over real HTTP. Contract: 002_…txt."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.engine.events import OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from tests.fakes.vastai_server import FakeVast
from tests.tui.test_dashboard_run import dashboard, is_, vast_env
from tests.tui.test_dashboard_run import fake as fake


async def test_confirm_lease_false_rents_on_enter(fake: FakeVast, tmp_path: Path) -> None:
    fake.ssh_endpoint = ("127.0.0.1", 9, True)  # nothing listens: the lease is torn down
    env = {**vast_env(fake, tmp_path), "MVP_VASTAI_CONFIRM_LEASE": "false"}
    app, seen = dashboard(env, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, LeaseConfirmScreen)
        await seen.first(is_(lease.LeaseRunning), within=30)
        await seen.first(is_(lease.LeaseDeleted), within=30)
    assert fake.billing() == []


async def test_the_confirm_stays_by_default(fake: FakeVast, tmp_path: Path) -> None:
    app, seen = dashboard(vast_env(fake, tmp_path), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LeaseConfirmScreen)
    assert fake.instances() == []
