"""The full text of something a pane shows cut to its width (a failure's reason, a lease's
history line), in a scrollable view; `y` copies it.

The text is untrusted (node and provider words): the caller hands it in already cleaned,
and it is shown as plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Static

from mvp_tui.datastream import ChannelHub, display_text
from mvp_tui.datastream.channels import NODE_LOG_PREFIX
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.dialog import Choice, DialogScreen

DETAIL_CSS = """
DetailScreen > .dialog { border: round $accent; width: 120; }
DetailScreen #detail-text { width: 1fr; }
"""
LOG_LINES = 20  # the node's last log lines shown under a failure
LOG_LINE_CHARS = 400


class DetailScreen(DialogScreen[None]):
    """One text in full: Esc closes, `y` (or the Copy button) copies it."""

    DEFAULT_CSS = DETAIL_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "copy", "copy", id="detail-copy"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(focus="close", cancel_value="close")
        self._title = title
        self.text = text

    def dialog_title(self) -> Text:
        return Text(clean_line(self._title, 200))

    def compose_body(self) -> Iterable[Widget]:
        yield Static(Text(self.text), id="detail-text")

    def choices(self) -> list[Choice]:
        return [Choice("copy", "Copy (y)"), Choice("close", "Close", "primary")]

    def result_for(self, value: str) -> None:
        return None

    def act(self, value: str) -> bool:
        if value == "copy":
            self.action_copy()
            return True
        return False

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.text)
        self.app.notify("copied to the clipboard", timeout=3, markup=False)


def node_log_tail(hub: ChannelHub | None, lines: int = LOG_LINES) -> list[str]:
    """The node's last log lines (stderr first, where engines say why), cleaned."""
    if hub is None:
        return []
    out: list[str] = []
    names = [s.channel for s in hub.snapshot().channels if s.channel.startswith(NODE_LOG_PREFIX)]
    for channel in sorted(names, key=lambda c: (not c.endswith("stderr"), c)):
        tail = hub.tail(channel, -1, limit=lines)
        if tail.frames:
            out.append(f"-- {channel} (last {len(tail.frames)}) --")
            out += [display_text(frame, LOG_LINE_CHARS) for frame in tail.frames]
    return out
