"""A small app that hosts the dashboard's panes alone, for pilot and snapshot tests.

It loads the real themes and `app.tcss`, so widgets look as they do in the dashboard, and
keeps every message the panes post to the app in `received`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.console import Console
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from mvp_tui.themes import APP_CSS_PATH, DARK_VARIABLES, THEMES

SINGLE_CSS = """
Screen { layout: vertical; }
Pane { height: 1fr; width: 1fr; }
"""


class Harness(App[None]):
    """Hosts `make()`'s widgets; `layout="grid"` keeps the dashboard's 2x3 grid."""

    CSS_PATH = str(APP_CSS_PATH)
    layouts: ClassVar[dict[str, str]] = {"single": SINGLE_CSS, "grid": ""}

    def __init__(
        self,
        make: Callable[[], Iterable[Widget]],
        *,
        layout: str = "single",
        theme: str = "mvp-dark",
    ) -> None:
        super().__init__()
        self._make = make
        self._layout_css = self.layouts[layout]
        for item in THEMES:
            self.register_theme(item)
        self.theme = theme
        self.received: list[Message] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(DARK_VARIABLES)

    def compose(self) -> ComposeResult:
        yield from self._make()

    def on_mount(self) -> None:
        for widget in self.query(Input):
            widget.cursor_blink = False  # snapshots must not catch a blink
        if self._layout_css:
            self.stylesheet.add_source(self._layout_css, read_from=("harness", "layout"))
            self.stylesheet.reparse()
            self.stylesheet.update(self)

    def post_message(self, message: Message) -> bool:
        # Messages bubble to the app through here: keep the panes' own.
        if type(message).__module__.startswith("mvp_tui.widgets"):
            self.received.append(message)
        return super().post_message(message)

    def of(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.received if isinstance(m, kind)]


def screen_text(app: App[object]) -> str:
    """The screen as plain text (what a reader sees, without colour), for assertions."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()
