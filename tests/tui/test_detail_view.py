"""A reason cut to a pane's width is never lost: Enter on the Bootstrap pane or a lease
shows the whole text (and, for a failure, the node's last log lines) in a scrollable view of
the real dashboard, and `y` copies it."""

from __future__ import annotations

from datetime import UTC

from textual.containers import VerticalScroll

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.lease.events import LeaseNotReady
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.leases import LeasesPane
from tests.tui.apps import make_app
from tests.widgets.data import T0, agent_record, fixed_clock, publish_node, walk_events

URL = "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/" + "x" * 120
REASON = f"model download of {URL} failed: HTTP 403 (the repository is gated)"
FIX = "accept the model's licence on huggingface.co, or set HF_TOKEN"
LOG = "mvp.provisioning.logs.node.1.stderr"


async def test_enter_on_bootstrap_shows_a_failure_whole_with_the_nodes_log_and_y_copies() -> None:
    hub = ChannelHub(clock=lambda: 0.0)
    app = make_app(hub=hub, wall=fixed_clock(T0 + 95), tz=UTC)
    async with app.run_test(size=(100, 30)) as pilot:
        for event in walk_events():
            app.dashboard.route(event)
        failed = agent_record(
            "NodeAgentPhase", T0 + 90, phase="model", status="failed",
            detail={"reason": REASON, "fix": FIX},
        )
        publish_node(hub, failed)
        for n in range(30):
            hub.publish(LOG, f"stderr line {n}".encode())
        pane = app.query_one(BootstrapPane)
        await pilot.pause()
        pane.poll()
        await pilot.pause()
        assert "…" in pane.checklist_text().plain or URL not in pane.checklist_text().plain
        pane.focus()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert REASON in screen.text and FIX in screen.text
        assert "stderr line 29" in screen.text  # the node's last log lines
        assert "stderr line 0\n" not in screen.text  # only the last ones
        body = screen.query_one(".dialog-body", VerticalScroll)
        assert body.max_scroll_y > 0  # longer than the screen: it scrolls inside
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == screen.text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DetailScreen)


async def test_enter_on_a_lease_shows_its_lines_whole() -> None:
    app = make_app(wall=fixed_clock(T0 + 95), tz=UTC)
    reason = "the instance reported an error: " + "CUDA driver mismatch " * 12 + "(end)"
    async with app.run_test(size=(80, 24)) as pilot:
        for event in walk_events():
            app.dashboard.route(event)
        not_ready = LeaseNotReady(at=T0 + 96, run_id="r-7f3a", provider_id="7003", reason=reason)
        app.dashboard.route(not_ready)
        await pilot.pause()
        pane = app.query_one(LeasesPane)
        pane.focus()
        await pilot.press("down")  # 7003 (the first row was deleted)
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert reason in screen.text
        assert "7003" in screen.text
