"""Issue 40 §4: the Channels and Leases panes' tables keep their render caches bounded.
Textual's `DataTable` caches every cell, row and line it renders (10,000 cells), keyed by the
table's update count: a pane whose counts change every second filled them for hours
(bench/bench_soak.py: +10 MiB between the 500th and the 4,500th prompt)."""

from __future__ import annotations

from textual.widgets import DataTable

from mvp_tui.datastream import ChannelHub
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.table_caches import RENDER_CACHES, bound_render_caches
from tests.widgets.data import fixed_clock
from tests.widgets.harness import Harness


def test_every_render_cache_named_is_one_textual_has() -> None:
    # A Textual that renamed one would leave that cache at its own size: said here, loudly.
    assert bound_render_caches(DataTable()) == list(RENDER_CACHES)


async def test_a_channels_table_updated_for_hours_keeps_its_caches_bounded() -> None:
    app = Harness(lambda: [ChannelsPane(clock=fixed_clock(0.0))])
    hub = ChannelHub(clock=lambda: 0.0)
    channels = [f"mvp.node.{n}.stdout" for n in range(6)]
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(ChannelsPane)
        pane.attach_hub(hub)
        table = pane.table
        for _second in range(150):  # each poll: new counts, every visible cell drawn anew
            for name in channels:
                hub.publish(name, b"x")
            pane.poll()
            await pilot.pause()
        assert table.row_count == len(channels)
        for name, entries in RENDER_CACHES.items():
            assert len(getattr(table, name)) <= entries, name


async def test_the_leases_table_is_bounded_too() -> None:
    app = Harness(lambda: [LeasesPane()])
    async with app.run_test(size=(100, 20)):
        table = app.query_one(LeasesPane).table
        for name, entries in RENDER_CACHES.items():
            assert getattr(table, name).maxsize == entries, name
