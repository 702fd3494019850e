"""A titled dashboard pane that says what will appear in it, and how to get it going."""

from __future__ import annotations

from typing import Self

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
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
        # A replay: keys that would act on a live run are hidden (they could do nothing).
        self.read_only = False

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

    def focus_target(self) -> Widget | None:
        """The child that should hold focus when the pane is focused (None: the pane)."""
        return None

    def _content_target(self) -> Widget | None:
        target = self.focus_target()
        return target if target is not None and target.display and target.focusable else None

    def focus(self, scroll_visible: bool = True) -> Self:
        """Focus the pane's content when it has some (its keys work at once), else the pane."""
        target = self._content_target()
        if target is not None:
            target.focus(scroll_visible)
            return self
        return super().focus(scroll_visible)

    def on_focus(self, event: events.Focus) -> None:
        # Focus that reached the pane another way (auto-focus, a click): hand it on.
        target = self._content_target()
        if target is not None:
            target.focus()
