"""A confirm modal whose focus starts on the safe choice (k9s habit)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from mvp_tui.untrusted import clean_line, clean_lines
from mvp_tui.widgets.dialog import Choice, DialogScreen

__all__ = ["Choice", "ConfirmScreen"]

TITLE_CHARS = 200
BODY_LINE_CHARS = 1000


class ConfirmScreen(DialogScreen[str]):
    """Returns the chosen `Choice.value`; Esc returns `cancel_value`.

    Title and body may quote provider text (lease ids, GPU names, errors): both are cleaned
    here and shown as plain text, never markup.
    """

    def __init__(
        self, title: str, body: str, choices: list[Choice], *, focus: str, cancel_value: str
    ) -> None:
        super().__init__(focus=focus, cancel_value=cancel_value)
        self._title = title
        self._body = body
        self._choices = choices

    def dialog_title(self) -> Text:
        return Text(clean_line(self._title, TITLE_CHARS))

    def compose_body(self) -> Iterable[Widget]:
        yield Static(Text(clean_lines(self._body, BODY_LINE_CHARS)), classes="confirm-body")

    def choices(self) -> list[Choice]:
        return self._choices

    def result_for(self, value: str) -> str:
        return value
