"""A titled dashboard pane that says what will appear in it, and how to get it going."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static


class Pane(Vertical, can_focus=True):
    """Base of the five panes: a bordered, titled, focusable container with an empty state.

    Subclasses set `TITLE` and `EMPTY_TEXT` and add their content in `compose_content`.
    """

    TITLE = ""
    EMPTY_TEXT = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = self.TITLE

    def compose(self) -> ComposeResult:
        yield Static(Text(self.empty_text()), classes="empty")
        yield from self.compose_content()

    def compose_content(self) -> ComposeResult:
        yield from ()

    def empty_text(self) -> str:
        return self.EMPTY_TEXT

    def set_empty(self, empty: bool) -> None:
        """Show the empty-state text only while the pane has nothing else to show."""
        self.query_one(".empty", Static).display = empty
