"""The dashboard shell driven by keys (Textual Pilot)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from mvp_tui.tui.dashboard_screen import PANE_ORDER
from mvp_tui.widgets.help_screen import HelpScreen
from mvp_tui.widgets.pane import Pane
from tests.tui.apps import hold_lease, make_app

TITLES = ["Offers", "Leases", "Bootstrap", "Channels", "Prompt"]


def _focused_pane(app) -> str:  # type: ignore[no-untyped-def]
    node = app.focused
    while node is not None and not isinstance(node, Pane):
        node = node.parent
    return node.id if node is not None else ""


async def test_five_titled_panes_each_say_what_comes() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)):
        panes = list(app.query(Pane))
        assert sorted(p.border_title for p in panes) == sorted(TITLES)  # type: ignore[misc]
        for pane in panes:
            text = str(pane.query_one(".empty", Static).render())
            assert len(text) > 40, f"{pane.border_title} says too little: {text!r}"


async def test_tab_and_shift_tab_cycle_panes() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        seen = [_focused_pane(app)]
        for _ in range(len(PANE_ORDER)):
            await pilot.press("tab")
            seen.append(_focused_pane(app))
        assert seen == [*PANE_ORDER, PANE_ORDER[0]]
        await pilot.press("shift+tab")
        assert _focused_pane(app) == PANE_ORDER[-1]


async def test_help_screen_lists_binding_ids_and_closes() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_remapped_keys_from_config(tmp_path: Path) -> None:
    app = make_app(tmp=tmp_path, toml='[ui.keys]\nnext-pane = "f6"\nhelp = "f1"\n')
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("f6")
        assert _focused_pane(app) == PANE_ORDER[1]
        await pilot.press("question_mark")  # the old key no longer opens help
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert isinstance(app.screen, HelpScreen)
        assert ("f6", "next pane", "next-pane") in app.screen.rows()


async def test_q_quits_at_once_when_nothing_is_live() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_q_with_a_live_lease_asks_and_focus_starts_on_destroy() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        hold_lease(app)
        await pilot.press("q")
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "choice-destroy"
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running  # cancel keeps the app open


async def test_ctrl_c_with_a_live_lease_asks_too() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        hold_lease(app)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "choice-destroy"
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running


async def test_theme_switch_is_written_back_keeping_comments(tmp_path: Path) -> None:
    app = make_app(tmp=tmp_path, toml='# mine\n[ui]\n# keep me\ntheme = "mvp-dark"\n')
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == "mvp-light"
    text = (tmp_path / "config.toml").read_text()
    assert "# keep me" in text and 'theme = "mvp-light"' in text


async def test_layout_usable_at_100x30_and_240x70() -> None:
    for size in ((100, 30), (240, 70)):
        app = make_app()
        async with app.run_test(size=size):
            for pane in app.query(Pane):
                region = pane.region
                assert region.width >= 30 and region.height >= 5, (size, pane.id, region)
