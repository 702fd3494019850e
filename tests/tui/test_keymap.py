"""Every binding has an id and every id is remappable in `[ui.keys]`: the list the config
accepts is the widgets' own bindings, derived from their classes."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.keymap import APP_BINDINGS, BINDING_IDS, WIDGET_BINDING_IDS
from mvp_tui.tui.bindings import unnamed_bindings, widget_bindings
from mvp_tui.widgets.offers import OffersPane
from tests.tui.apps import hold_lease, let_go, make_app
from tests.widgets.data import small_offers


def test_the_accepted_ids_are_the_widgets_own_bindings() -> None:
    assert unnamed_bindings() == []  # a binding without an id could not be remapped
    assert {b.id for b in widget_bindings()} == set(WIDGET_BINDING_IDS)
    assert {b.id for b in APP_BINDINGS} | set(WIDGET_BINDING_IDS) == set(BINDING_IDS)


async def test_table_cursor_and_dialog_keys_can_be_remapped(tmp_path: Path) -> None:
    toml = "[ui.keys]\noffers-cursor-down = \"j\"\ndialog-right = \"l\"\ndialog-left = \"h\"\n"
    app = make_app(toml=toml, tmp=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(OffersPane)
        pane.set_offers(small_offers())
        pane.focus()
        await pilot.pause()
        before = pane.table.cursor_row
        await pilot.press("j")
        assert pane.table.cursor_row == before + 1
        hold_lease(app)
        await pilot.press("q")  # the quit question: focus on "Destroy and quit" (the last)
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "choice-destroy"
        await pilot.press("h")
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "choice-keep"
        await pilot.press("l")
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "choice-destroy"
        await pilot.press("escape")
        let_go(app)


async def test_the_palette_has_the_apps_commands_with_their_keys(tmp_path: Path) -> None:
    from textual.command import CommandPalette

    toml = '[ui.keys]\nsearch-offers = "f5"\n'
    app = make_app(toml=toml, tmp=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for expected in ("Lease the focused offer (Enter)", "Tear down the selected lease "
                         "(ctrl+d)", "Search offers again (f5)", "Open a channel's log "
                         "(Enter)", "Switch theme (ctrl+t)", "Show keys (?)"):
            assert expected in titles, titles
        assert any(t.startswith("Replay an archive") for t in titles)
        # The palette opens on `:` and finds them by typing.
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"show keys", "enter")
        await pilot.pause()
        from mvp_tui.widgets.help_screen import HelpScreen

        assert isinstance(app.screen, HelpScreen)
