"""Dashboard instances for screen tests: fixed clock, fixed config, no user files."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.tui.app import MvpApp

FIXED_NOW = datetime(2026, 11, 30, 12, 4, 31)


def make_app(
    *,
    theme: str = "mvp-dark",
    toml: str | None = None,
    tmp: Path | None = None,
    env: dict[str, str] | None = None,
    hub: ChannelHub | None = None,
    wall: Callable[[], float] | None = None,
    tz: tzinfo | None = None,
) -> MvpApp:
    paths = ConfigPaths(default=Path("/nonexistent/mvp-tui/config.toml"))
    if toml is not None:
        assert tmp is not None
        path = tmp / "config.toml"
        path.write_text(toml)
        paths = ConfigPaths(explicit=path, explicit_source="test")
    config = load_config(env={"MVP_UI_THEME": theme, **(env or {})}, paths=paths)
    return MvpApp(config, clock=lambda: FIXED_NOW, hub=hub, wall=wall or time.time, tz=tz)
