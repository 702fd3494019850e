"""`mvp-tui replay`: the dashboard on an archive, read-only, pausable and seekable."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.archive import read_archive
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.widgets.status_bar import StatusBar
from tests.tui.apps import FIXED_NOW
from tests.widgets.data import write_archive
from tests.widgets.harness import screen_text


def _app(archive: Path, speed: float = 64.0) -> tuple[MvpApp, ReplayControl]:
    config = load_config(env={}, paths=ConfigPaths(default=Path("/nonexistent/c.toml")))
    total = sum(1 for _ in read_archive(archive))
    control = ReplayControl(archive, total, speed=speed)
    return MvpApp(config, hub=control.hub, replay=control, clock=lambda: FIXED_NOW), control


async def test_replay_reproduces_the_archive_channel_counts(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "run.jsonl")
    expected = Counter(rec.frame.channel for rec in read_archive(archive))
    app, control = _app(archive)
    async with app.run_test(size=(160, 48)) as pilot:
        await control.source.idle.wait()
        await pilot.pause()
        counts = {s.channel: s.count for s in control.hub.snapshot().channels}
        assert counts == dict(expected)
        assert app.session is None  # read-only: no provider exists to call
        assert f"frame {control.total}/{control.total}" in control.describe()
        # the status bar shows the same line (it refreshes 4x a second)
        app.dashboard.update_summary()
        assert app.query_one(StatusBar).summary.replay == control.describe()


async def test_pause_and_seek_back_by_keys(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "run.jsonl", log_lines=200)
    app, control = _app(archive, speed=1.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("p")
        assert control.source.paused
        assert "paused" in (app.query_one(StatusBar).summary.replay or "")
        control.source.seek(control.total)  # to the end, then a tenth back by key
        await control.source.idle.wait()
        before = sum(s.count for s in control.hub.snapshot().channels)
        control.source.idle.clear()
        await pilot.press("comma")
        await control.source.idle.wait()
        after = sum(s.count for s in control.hub.snapshot().channels)
        assert before == control.total
        assert after == control.total - max(1, control.total // 10)


def _run_archive(path: Path) -> Path:
    """What a run archives: its events through the engine's own tap (OrchTap) onto an
    archive-backed hub: the walk, SSH, the engine ready, one prompt, the teardown."""
    from mvp_tui.datastream.archive import FrameArchive
    from mvp_tui.datastream.frame import StreamId
    from mvp_tui.datastream.hub import ChannelHub
    from mvp_tui.engine.events import NodeReady
    from mvp_tui.engine.orch import OrchTap
    from mvp_tui.lease.events import DeleteReason, LeaseDeleted, LeaseDeleting
    from mvp_tui.prompt.events import PromptDone, PromptQueued, PromptStarted, TextDelta
    from mvp_tui.secrets import Redactor
    from tests.widgets.data import RUN, T0, ssh_events, walk_events

    clock = iter(range(100_000))
    hub = ChannelHub(clock=lambda: float(next(clock)) / 1000, stream=StreamId("mvp-orch", 1))
    with FrameArchive(path, timing=False) as archive:
        hub.archive = archive
        tap = OrchTap(lambda _e: None, hub, run_id=RUN, node_id=1, redactor=Redactor([]))
        events = [
            *walk_events(),
            *ssh_events(),
            NodeReady(at=T0 + 90, run_id=RUN, model_id="tiny", engine="llama.cpp",
                      local_url="http://127.0.0.1:18081", load_ms=800),
            PromptQueued(at=T0 + 91, prompt_id=1, text_chars=5, max_tokens=16, position=0),
            PromptStarted(at=T0 + 91.1, prompt_id=1),
            *[TextDelta(at=T0 + 91.2 + i / 10, prompt_id=1, text="tok ") for i in range(3)],
            PromptDone(at=T0 + 92, prompt_id=1, final_text="tok tok tok", tokens_generated=3,
                       elapsed_ms=900, ttft_ms=100, tokens_per_s=3.3),
            LeaseDeleting(at=T0 + 95, run_id=RUN, provider_id="7003",
                          reason=DeleteReason.REQUESTED),
            LeaseDeleted(at=T0 + 97, run_id=RUN, provider_id="7003", uptime_s=23.3,
                         spend_usd=0.0023),
        ]
        for event in events:
            tap(event)
    return path


async def test_replay_fills_leases_and_prompt_and_shows_only_replay_keys(tmp_path: Path) -> None:

    from mvp_tui.widgets.leases import LeasesPane
    from mvp_tui.widgets.leases_model import LeaseDisplayState
    from mvp_tui.widgets.prompt import PromptPane
    from tests.widgets.data import wait_until

    archive = _run_archive(tmp_path / "run.jsonl")
    app, control = _app(archive)
    async with app.run_test(size=(160, 48)) as pilot:
        await control.source.idle.wait()
        leases = app.query_one(LeasesPane)
        await wait_until(pilot, lambda: "7003" in leases.model.leases)
        await wait_until(
            pilot, lambda: leases.model.leases["7003"].state is LeaseDisplayState.DELETED
        )
        history = leases.model.full_text()
        assert "unavailable" in history  # the first offer was sold: its create line
        assert "created 7003" in history
        prompt = app.query_one(PromptPane)
        await wait_until(pilot, lambda: "3 tok" in prompt.view.text())
        assert prompt.view.text().startswith("> ")
        # The footer: replay keys shown, the live ones (lease, teardown, offers, sort) not.
        # The footer is read whole at one paint (a binding refresh redraws it in between).
        footer = ""

        def footer_shows_replay_keys() -> bool:
            nonlocal footer
            footer = screen_text(app).splitlines()[-1]
            return all(key in footer for key in
                       ("pause", "back 10%", "forward 10%", "faster", "slower"))

        await wait_until(pilot, footer_shows_replay_keys)
        for live in ("offers", "teardown", "sort", "lease"):
            assert live not in footer, footer
