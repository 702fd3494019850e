"""Bootstrap checklist (events + hub frames) and the Channels pane with its log screen."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from mvp_tui.datastream import ChannelHub, LogStream, node_log_channel
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from mvp_tui.widgets.channel_log import ChannelLogScreen
from mvp_tui.widgets.channels import ChannelsPane
from tests.widgets.data import (
    T0,
    fixed_clock,
    replay_into,
    ssh_events,
    walk_events,
    write_archive,
)
from tests.widgets.harness import Harness, screen_text

SIZE = (160, 48)
STDOUT = node_log_channel(1, LogStream.STDOUT)


async def test_bootstrap_checklist_from_events_and_frames(tmp_path: Path) -> None:
    app = Harness(lambda: [BootstrapPane(clock=fixed_clock(T0 + 95))])
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(BootstrapPane)
        assert pane.query_one(".empty", Static).display
        for event in [*walk_events(), *ssh_events()]:
            pane.handle_event(event)
        hub = ChannelHub(clock=lambda: 0.0)
        await replay_into(write_archive(tmp_path / "run.jsonl"), hub)
        pane.attach_hub(hub)
        await pilot.pause()
        stages = pane.model.stages
        assert stages[StageId.LEASE].status is Status.DONE
        assert stages[StageId.LEASE].detail == "1.2.3.4:22022 direct"
        assert stages[StageId.SSH].name == "ssh attempt 3"
        assert stages[StageId.SSH].status is Status.DONE
        assert stages[StageId.HOST_KEY].detail == "SHA256:Qx3Lk9vZ1aB7 first use"
        assert stages[StageId.AGENT].detail == "pid 311"
        assert stages[StageId.MODEL].status is Status.ACTIVE
        assert stages[StageId.ENGINE].status is Status.DONE  # WeightsLoaded
        assert "tiny-llama-q4" in stages[StageId.ENGINE].detail
        text = pane.checklist_text().plain
        assert "✓ lease running" in text and "41.2 s" in text
        assert "● model" in text and "71%" in text and "280.0 MB/s" in text
        assert "✓ config" in text  # the orchestrator's own phase
        # The orchestrator's lease phase is the fixed "lease running" row, not a second one.
        assert len([line for line in text.splitlines() if "lease" in line]) == 1
        assert pane.border_subtitle == "lease 7003"
        assert not pane.query_one(".empty", Static).display


async def test_bootstrap_ssh_retries_show_the_next_try_and_a_new_lease_starts_afresh() -> None:
    app = Harness(lambda: [BootstrapPane(clock=fixed_clock(T0 + 95))])
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(BootstrapPane)
        walk = walk_events()
        for event in [*walk, *ssh_events()[:2]]:
            pane.handle_event(event)
        await pilot.pause()
        ssh = pane.model.stages[StageId.SSH]
        assert ssh.status is Status.ACTIVE
        assert ssh.detail == "1.2.3.4:22022 timed out · next try in 2 s"
        assert "● ssh attempt 2" in pane.checklist_text().plain
        running = walk[-1]
        assert running.kind == "lease_running"
        from dataclasses import replace

        pane.handle_event(replace(running, provider_id="7009"))  # type: ignore[type-var]
        assert pane.model.stages[StageId.SSH].status is Status.PENDING


async def test_channels_pane_lists_counts_and_opens_a_following_log(tmp_path: Path) -> None:
    app = Harness(lambda: [ChannelsPane(clock=fixed_clock(0.0))])
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(ChannelsPane)
        hub = ChannelHub(clock=lambda: 0.0, ring_frames=500)
        await replay_into(write_archive(tmp_path / "run.jsonl"), hub)
        pane.attach_hub(hub)
        await pilot.pause()
        table = pane.table
        keys = [r.key.value for r in table.ordered_rows]
        assert keys == [c.channel for c in hub.snapshot().channels]
        assert table.get_cell(STDOUT, "frames").plain == "40"
        assert table.get_cell(STDOUT, "last").plain == "39"
        # More frames: one poll, cells updated in place.
        hub.publish(STDOUT, b'{"line":{"run_id":7,"node_id":1,"stream":"Stdout","line":"x"}}')
        pane.poll()
        assert table.get_cell(STDOUT, "frames").plain == "41"
        pane.focus()
        await pilot.pause()
        table.move_cursor(row=table.get_row_index(STDOUT))
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ChannelLogScreen) and screen.channel == STDOUT
        log = screen.log_widget
        assert len(log.lines) == 41 and screen.following
        assert log.lines[3] == "[bold red]not markup[/] red? \ufffd\ufffd"
        assert "[bold red]not markup[/]" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ChannelLogScreen)


async def test_channel_log_pauses_when_scrolled_up_and_counts_new_lines() -> None:
    hub = ChannelHub(clock=lambda: 0.0)
    channel = "mvp.node.1.engine"
    for i in range(200):
        hub.publish(channel, f"line {i}".encode())
    app = Harness(lambda: [Static("under")])
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ChannelLogScreen(hub, channel, max_lines=1000)
        await app.push_screen(screen)
        await pilot.pause()
        log = screen.log_widget
        assert len(log.lines) == 200 and log.is_vertical_scroll_end
        await pilot.press("pageup")
        await pilot.pause()
        assert not screen.following
        top = log.scroll_y
        for i in range(200, 250):
            hub.publish(channel, f"line {i}".encode())
        screen.flush()
        await pilot.pause()
        assert len(log.lines) == 200  # nothing written while paused
        assert log.scroll_y == top  # the view did not move
        state = str(screen.query_one("#channel-log-state", Static).render())
        assert "+50 new" in state and "paused" in state
        await pilot.press("f")
        await pilot.pause()
        assert screen.following and len(log.lines) == 250
        assert log.lines[-1] == "line 249"
        assert log.is_vertical_scroll_end
        await pilot.press("up")
        await pilot.pause()
        assert not screen.following
        await pilot.press("end")  # End resumes too
        await pilot.pause()
        assert screen.following


async def test_channel_log_reports_frames_that_left_the_ring() -> None:
    hub = ChannelHub(clock=lambda: 0.0, ring_frames=100)
    channel = "mvp.node.1.engine"
    app = Harness(lambda: [Static("under")])
    async with app.run_test(size=(100, 30)) as pilot:
        hub.publish(channel, b"first")
        screen = ChannelLogScreen(hub, channel)
        await app.push_screen(screen)
        await pilot.pause()
        for i in range(350):
            hub.publish(channel, f"burst {i}".encode())
        screen.flush()
        assert screen.skipped == 250 and screen.written == 101
        assert screen.log_widget.lines[1] == "… 250 frame(s) not shown: they left the buffer"


def test_checklist_rows_keep_lifecycle_order_whatever_order_phases_arrive() -> None:
    import json

    from mvp_tui.widgets.bootstrap_model import BootstrapModel

    model = BootstrapModel()

    def phase(name: str, status: str, at: float) -> None:
        record = {"type": "OrchBootstrap", "phase": name, "status": status, "at": at}
        model.record("mvp.orch.bootstrap", json.dumps(record).encode(), at)

    # A teardown phase first (a replay seeking, an earlier lease), then the run's start.
    phase("teardown", "started", 10.0)
    phase("offers", "ready", 2.0)
    phase("config", "ready", 1.0)
    phase("lease", "ready", 5.0)
    names = [row.name for row in model.rows()]
    assert names[:3] == ["config", "offers", "lease running"]
    assert names[-1] == "teardown"
    assert names.index("engine healthy") < names.index("teardown")


async def test_channels_pane_footer_counts_one_channel_in_the_singular() -> None:
    app = Harness(lambda: [ChannelsPane(clock=fixed_clock(0.0))])
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(ChannelsPane)
        hub = ChannelHub(clock=lambda: 0.0)
        pane.attach_hub(hub)
        hub.publish("mvp.orch.bootstrap", b"{}")
        for _ in range(100):
            await pilot.pause()
            if str(pane.border_subtitle).startswith("1"):
                break
        assert str(pane.border_subtitle) == "1 channel · 1 frame"
        hub.publish("mvp.orch.prompt", b"{}")
        for _ in range(100):
            await pilot.pause()
            if str(pane.border_subtitle).startswith("2"):
                break
        assert str(pane.border_subtitle) == "2 channels · 2 frames"
