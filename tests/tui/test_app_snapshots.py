"""The real composed dashboard (`MvpApp`) mid-run, as SVG snapshots at 80x24, 100x30 and
160x48 in both themes: every pane filled from fixed events and a replayed archive, the lease
confirm, and a failure's detail view. Clocks are frozen; no process or network is used."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input

from mvp_tui.datastream import ChannelHub
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from mvp_tui.widgets.offers import OffersPane
from tests.tui.apps import Toasts, make_app, record_toasts
from tests.widgets.data import (
    T0,
    agent_record,
    fixed_clock,
    publish_node,
    wait_until,
    write_archive,
)
from tests.widgets.test_snapshots import dashboard

SIZES = [(80, 24), (100, 30), (160, 48)]
SIZE_IDS = ["80x24", "100x30", "160x48"]
THEMES = ["mvp-dark", "mvp-light"]
RunBefore = Callable[[Pilot[None]], Awaitable[None]]
REASON = (
    "model download of https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/"
    "main/Llama-3.2-1B-Instruct-Q4_K_M.gguf failed: HTTP 403 (the repository is gated)"
)


def _app(theme: str) -> MvpApp:
    app = make_app(theme=theme, hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 95),
                   tz=UTC, env={"MVP_PROVIDER": "vastai"})
    _TOASTS[app] = record_toasts(app)
    return app


async def _clear_refusal(pilot: Pilot[None]) -> None:
    """The refused prompt's toast, waited for by its words and cleared (on the screen it is
    on: a modal pushed later would keep showing the one beneath through its backdrop)."""
    app = pilot.app
    if app in _REFUSAL_CLEARED:
        return
    toasts = _TOASTS[app]  # raised, though on a loaded machine it may have timed out since
    await wait_until(pilot, lambda: bool(toasts.saying("not serving")))
    app.clear_notifications()
    _REFUSAL_CLEARED.add(app)
    await pilot.pause()


_REFUSAL_CLEARED: weakref.WeakSet[App[Any]] = weakref.WeakSet()
_TOASTS: weakref.WeakKeyDictionary[App[Any], Toasts] = weakref.WeakKeyDictionary()


def _cleared(run_before: RunBefore) -> RunBefore:
    async def run(pilot: Pilot[None]) -> None:
        await run_before(pilot)
        app = pilot.app
        assert isinstance(app, MvpApp)
        app._exit_cleared = True  # the shell holds no engine: the snapshot's exit goes through
        # The prompt typed into this engine-less shell is refused with a toast: not the
        # subject here, and it would cover the modal's buttons. Cleared once it is there.
        await _clear_refusal(pilot)
        for widget in app.query(Input):
            widget.cursor_blink = False  # a snapshot must not catch a blink
        # The footer's keys follow the panes' state (a live prompt enables Esc): settle it.
        app.refresh_bindings()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    return run


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / "run.jsonl")


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_app_mid_run(snap_compare, archive: Path, size: tuple[int, int], theme: str) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(theme), terminal_size=size, run_before=_cleared(dashboard(archive)))


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_app_lease_confirm(snap_compare, archive: Path, size: tuple[int, int], theme: str) -> None:  # type: ignore[no-untyped-def]
    mid_run = dashboard(archive)

    async def run_before(pilot: Pilot[None]) -> None:
        await mid_run(pilot)
        await _clear_refusal(pilot)  # before the modal covers the screen it is on
        app = pilot.app
        assert isinstance(app, MvpApp)
        model = app.query_one(OffersPane).model
        chosen = model.chosen(model.view()[0], 5)  # the two picks, in their order
        await app.push_screen(app.dashboard.lease_confirm_screen(chosen))
        await pilot.pause()
        assert isinstance(app.screen, LeaseConfirmScreen)

    assert snap_compare(_app(theme), terminal_size=size, run_before=_cleared(run_before))


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_app_failure_view(snap_compare, archive: Path, size: tuple[int, int], theme: str) -> None:  # type: ignore[no-untyped-def]
    mid_run = dashboard(archive)

    async def run_before(pilot: Pilot[None]) -> None:
        await mid_run(pilot)
        await _clear_refusal(pilot)  # before the modal covers the screen it is on
        app = pilot.app
        assert isinstance(app, MvpApp)
        pane = app.query_one(BootstrapPane)
        assert pane.hub is not None
        failed = agent_record("NodeAgentPhase", T0 + 93, phase="model", status="failed",
                              detail={"reason": REASON, "fix": "set HF_TOKEN"})
        publish_node(pane.hub, failed)
        pane.poll()
        pane.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)

    assert snap_compare(_app(theme), terminal_size=size, run_before=_cleared(run_before))
