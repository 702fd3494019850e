"""Every modal of the real dashboard shows all of itself, buttons included, at every size
from 80x24 up: the body scrolls inside, the focused button is marked and the hint names
what Enter does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Button, Static

from mvp_tui.lease.records import LeaseRecord, LeaseRecordState
from mvp_tui.lease.restart import OpenLease
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.dashboard_screen import earlier_leases_screen
from mvp_tui.widgets.dialog import MARK_LEFT, DialogScreen
from mvp_tui.widgets.leases import LeasesPane
from tests.tui.apps import hold_lease, make_app
from tests.widgets.data import T0, fixed_clock, many_offers, wait_until, walk_events

SIZES = [(80, 24), (100, 30), (120, 40), (160, 48)]
Open = Callable[[MvpApp, Pilot[None]], Awaitable[None]]


def _earlier(count: int) -> list[OpenLease]:
    return [
        OpenLease(
            run_id=f"r-{n:02d}",
            lease=LeaseRecord(
                provider="vastai",
                label=f"mvp-r-{n:02d}-1-1",
                node_id=1,
                offer_id=str(1000 + n),
                gpu_name="RTX 4090",
                price_per_hour=0.3 + n / 100,
                state=LeaseRecordState.RUNNING,
                provider_id=str(7000 + n),
            ),
            exists=True,
        )
        for n in range(count)
    ]


async def open_lease_confirm(app: MvpApp, pilot: Pilot[None]) -> None:
    await app.push_screen(app.dashboard.lease_confirm_screen(tuple(many_offers(5))))


async def open_restart_check(app: MvpApp, pilot: Pilot[None]) -> None:
    # Many leases: the list is longer than an 80x24 screen, so the body must scroll.
    await app.push_screen(earlier_leases_screen(_earlier(30), can_attach=False))


async def open_quit_question(app: MvpApp, pilot: Pilot[None]) -> None:
    hold_lease(app)
    await pilot.press("q")


async def open_teardown_confirm(app: MvpApp, pilot: Pilot[None]) -> None:
    for event in walk_events():
        app.dashboard.route(event)
    await pilot.pause()
    app.query_one(LeasesPane).focus()
    await pilot.press("down", "ctrl+d")  # the running lease (the first row was deleted)


async def open_help(app: MvpApp, pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")


MODALS: dict[str, Open] = {
    "lease-confirm": open_lease_confirm,
    "restart-check": open_restart_check,
    "quit-question": open_quit_question,
    "teardown-confirm": open_teardown_confirm,
    "help": open_help,
}


def _inside(inner: Region, outer: Region) -> bool:
    return outer.contains_region(inner)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("name", list(MODALS))
async def test_modal_shows_everything_with_the_focused_button_marked(
    name: str, size: tuple[int, int]
) -> None:
    app = make_app(wall=fixed_clock(T0 + 95), tz=UTC)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await MODALS[name](app, pilot)
        # The dialog marks its focused button once focus lands (a turn after it opens).
        await wait_until(pilot, lambda: isinstance(app.screen, DialogScreen) and isinstance(
            app.screen.focused, Button) and str(app.screen.focused.label).startswith(MARK_LEFT))
        screen = app.screen
        assert isinstance(screen, DialogScreen), f"{name}: no dialog open"
        whole = Region(0, 0, *size)
        frame = screen.query_one(".dialog").region
        assert _inside(frame, whole), f"{name} at {size}: frame {frame} off screen"
        buttons = list(screen.query(".dialog-buttons Button").results(Button))
        assert buttons
        for button in buttons:
            assert button.region.height >= 1
            assert _inside(button.region, frame), f"{name} at {size}: {button.id} clipped"
        hint = screen.query_one(".dialog-hint", Static)
        assert _inside(hint.region, frame) and hint.region.height == 1
        focused = screen.focused
        assert isinstance(focused, Button)
        assert str(focused.label).startswith(MARK_LEFT)
        others = [b for b in buttons if b is not focused]
        assert all(not str(b.label).startswith(MARK_LEFT) for b in others)
        label = str(focused.label).removeprefix(MARK_LEFT).split(" ◂")[0]
        assert f"Enter: {label}" in str(hint.render())
        # Moving the focus moves the mark and the hint's default with it.
        if others:
            await pilot.press("right" if focused is not buttons[-1] else "left")
            await pilot.pause()
            moved = screen.focused
            assert isinstance(moved, Button) and moved is not focused
            assert str(moved.label).startswith(MARK_LEFT)
            assert not str(focused.label).startswith(MARK_LEFT)
        body = screen.query_one(".dialog-body", VerticalScroll)
        assert _inside(body.region, frame)
        if body.max_scroll_y > 0:  # a body taller than the room left scrolls inside
            await pilot.press("pagedown")
            await pilot.pause()
            assert body.scroll_y > 0


async def test_help_at_100x30_is_readable_and_reaches_every_key() -> None:
    from mvp_tui.keymap import APP_BINDINGS
    from mvp_tui.tui.bindings import all_bindings
    from tests.widgets.harness import screen_text

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await open_help(app, pilot)
        await pilot.pause()
        first = screen_text(app)
        for binding in APP_BINDINGS[:12]:  # the app's keys, on the first page
            assert binding.id in first, binding.id
        seen = first
        body = app.screen.query_one(".dialog-body", VerticalScroll)
        while body.scroll_y < body.max_scroll_y:
            await pilot.press("pagedown")
            await pilot.pause()
            seen += screen_text(app)
        for binding in all_bindings():
            assert binding.id in seen, binding.id


@pytest.mark.parametrize("name", list(MODALS))
async def test_the_first_button_a_dialog_focuses_is_its_own_choice(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the first button for a turn and then the dialog's choice: a quick Enter (or a
    paint) would see the first one marked. Every focus the dialog takes, in order."""
    focused: list[str | None] = []
    set_focus = DialogScreen.set_focus

    def record(screen: DialogScreen[Any], widget: Any, *args: Any, **kwargs: Any) -> None:
        focused.append(getattr(widget, "id", None))
        set_focus(screen, widget, *args, **kwargs)

    monkeypatch.setattr(DialogScreen, "set_focus", record)
    app = make_app(wall=fixed_clock(T0 + 95), tz=UTC)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await MODALS[name](app, pilot)
        await wait_until(pilot, lambda: isinstance(app.screen, DialogScreen) and bool(focused))
        screen = app.screen
        assert isinstance(screen, DialogScreen)
        await pilot.pause()
        assert focused[0] == f"{screen.button_prefix}{screen.focus_value}", focused
