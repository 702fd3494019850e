"""A narrow Channels pane cuts long channel names in the middle so the counts stay visible."""

from __future__ import annotations

from mvp_tui.datastream import ChannelHub
from mvp_tui.widgets.channels import ChannelsPane, fit_name
from tests.widgets.data import fixed_clock
from tests.widgets.harness import Harness

LONG = "mvp.provisioning.logs.node.12.provider"


def test_fit_name_keeps_the_meaningful_tail_in_whole_segments() -> None:
    assert fit_name("mvp.orch.bootstrap", 40) == "mvp.orch.bootstrap"
    cut = fit_name(LONG, 20)
    assert cut == "…node.12.provider"  # the tail wins over the start
    # The walk-through's 100x30 case: "mvp.…otstrap" lost the name's meaning.
    assert fit_name("mvp.orch.bootstrap", 12) == "…bootstrap"
    assert fit_name("mvp.orch.bootstrap", 16) == "…orch.bootstrap"
    assert fit_name("mvp.provisioning.events", 14) == "mvp.…events"
    assert fit_name("x" * 30, 10) == "…" + "x" * 9


async def test_counts_stay_on_screen_when_the_pane_is_narrow() -> None:
    app = Harness(lambda: [ChannelsPane(clock=fixed_clock(0.0))])
    hub = ChannelHub(clock=lambda: 0.0)
    for _ in range(12_345):
        hub.publish(LONG, b"x")
    async with app.run_test(size=(52, 10)) as pilot:
        pane = app.query_one(ChannelsPane)
        pane.attach_hub(hub)
        await pilot.pause()
        lines = [strip.text for strip in pane.table.render_lines(pane.table.region.reset_offset)]
        row = next(line for line in lines if "provider" in line)
        assert "12,345" in row and "…" in row, lines
