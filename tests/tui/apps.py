"""Dashboard instances for screen tests: fixed clock, fixed config, no user files."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path

from textual.app import App

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.run import RunEngine
from mvp_tui.lease import events as lease
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


@dataclass(frozen=True)
class Toast:
    title: str
    message: str


@dataclass
class Toasts:
    """Every toast an app raised, kept for the test: Textual's own list drops a toast once its
    timeout has passed in wall time, which a loaded machine reaches in mid-test."""

    raised: list[Toast] = field(default_factory=list)

    def titled(self, title: str) -> list[Toast]:
        return [t for t in self.raised if t.title == title]

    def saying(self, words: str) -> list[Toast]:
        return [t for t in self.raised if words in t.message]


def record_toasts(app: App[object]) -> Toasts:
    """Wrap `app.notify` (the public way every toast is raised) to keep each one's words."""
    toasts, notify = Toasts(), app.notify
    signature = inspect.signature(notify)

    def keep(*args: object, **kwargs: object) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        toasts.raised.append(Toast(str(bound.arguments["title"]),
                                   str(bound.arguments["message"])))
        notify(*args, **kwargs)  # type: ignore[arg-type]

    app.notify = keep  # type: ignore[method-assign]
    return toasts


def engine_of(app: MvpApp) -> RunEngine:
    """The engine of the provider a live dashboard walks now (its session's)."""
    assert app.session is not None, "a live dashboard (an engine was given)"
    return app.session.engine


HELD = "hold-1"  # the lease `hold_lease` routes (a shell has no engine to make one)


def hold_lease(app: MvpApp, at: float = 0.0) -> None:
    """A lease that bills now, as the engine would tell it (created, then running at $0/h):
    the ledger folds it, so the app's question before quitting asks."""
    app.dashboard.route(lease.AttemptAnswered(
        at=at, run_id="r", label="mvp-r-1", offer_id="1", outcome="created", http_status=200,
        detail="", provider_id=HELD, created_at=at))
    app.dashboard.route(lease.LeaseRunning(
        at=at, run_id="r", provider_id=HELD, label="mvp-r-1", host="198.51.100.7", port=22,
        user="root", via="direct", after_s=1.0, price_per_hour=0.0, created_at=at))


def let_go(app: MvpApp, at: float = 0.0) -> None:
    """`hold_lease`'s lease confirmed gone: nothing bills, the app quits without asking."""
    app.dashboard.route(lease.LeaseDeleted(at=at, run_id="r", provider_id=HELD, uptime_s=0.0,
                                           spend_usd=0.0))
