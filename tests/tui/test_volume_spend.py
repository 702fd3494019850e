"""The spend line names a network volume's monthly cost (issue 20 item 6): it bills by the
GB and month whether a pod runs or not, so the header says so beside the $/h."""

from __future__ import annotations

from mvp_tui.lease.events import VolumeMounted
from mvp_tui.widgets.status_bar import StatusBar
from tests.tui.apps import make_app
from tests.widgets.data import wait_until


async def test_the_header_shows_the_volumes_cost_per_month() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        bar = app.query_one(StatusBar)
        assert "volume" not in str(bar.render())
        app.dashboard.route(VolumeMounted(
            at=1.0, run_id="r", provider="runpod", volume_id="vol0000001", name="mvp-models",
            size_gb=40, data_center="EU-RO-1", usd_per_month=2.8,
        ))
        await wait_until(pilot, lambda: bar.summary.volume_usd_per_month == 2.8)
        await pilot.pause()
        assert "spent $0.0000 · volume $2.80/month" in str(bar.render())
