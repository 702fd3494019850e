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
        assert app.engine is None  # read-only: no provider exists to call
        assert f"frame {control.total}/{control.total}" in control.describe()
        app._update_summary()  # the status bar shows the same line (it refreshes 4x a second)
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
