"""A worker that cannot be leased is the run's reason as the user reads it (issue 23 §5):
`ClusterFailed` is a `UserError`, never "unexpected ClusterFailed: …"."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.cluster import ClusterFailed
from mvp_tui.engine.controller import RunController
from mvp_tui.engine.run import RunEngine
from mvp_tui.errors import UserError


async def test_a_failed_worker_is_said_as_it_is(tmp_path: Path) -> None:
    config = load_config(env={"MVP_STATE_DIR": str(tmp_path / "state")},
                         paths=ConfigPaths(default=tmp_path / "none.toml"))
    engine = RunEngine(config, lambda _event: None)
    try:
        failed = ClusterFailed("worker node 2 could not be leased: no offer left")
        assert isinstance(failed, UserError)
        reason = RunController(engine)._describe(failed)
        assert reason == "worker node 2 could not be leased: no offer left"
    finally:
        await engine.aclose()
