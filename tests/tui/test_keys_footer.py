"""The footer rebuilds its keys once for a burst of binding changes (the panes mounting and
focus settling before the first frame), and still shows the bindings as they end up."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from mvp_tui.tui.first_paint import KeysFooter


class CountingFooter(KeysFooter):
    recomposes = 0

    async def recompose(self) -> None:
        self.recomposes += 1
        await super().recompose()


class Host(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "bell", "ring the bell")]

    def compose(self) -> ComposeResult:
        yield Static("body")
        yield CountingFooter()


async def test_a_burst_of_binding_changes_recomposes_the_footer_once() -> None:
    app = Host()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        footer = app.query_one(CountingFooter)
        before = footer.recomposes

        def burst(changes: int) -> None:  # as the screen's signal calls it, on the footer
            for _ in range(changes):
                footer.bindings_changed(app.screen)

        footer.call_later(burst, 5)
        await pilot.pause()
        await pilot.pause()
        assert footer.recomposes == before + 1
        assert "ring the bell" in {key.description for key in footer.query("FooterKey")}
        footer.call_later(burst, 1)  # a change after that one gets its own
        await pilot.pause()
        await pilot.pause()
        assert footer.recomposes == before + 2
