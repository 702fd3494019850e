"""A confirm modal whose focus starts on the safe choice (k9s habit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from mvp_tui.untrusted import clean_line, clean_lines

CONFIRM_CSS = """
ConfirmScreen { align: center middle; }
ConfirmScreen > Vertical {
    width: 76; height: auto; border: thick $warning; background: $surface; padding: 1 2;
}
ConfirmScreen .confirm-title { text-style: bold; margin-bottom: 1; }
ConfirmScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
ConfirmScreen Button { margin-left: 1; }
"""


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: str
    variant: str = "default"  # Textual button variant


TITLE_CHARS = 200
BODY_LINE_CHARS = 1000


class ConfirmScreen(ModalScreen[str]):
    """Returns the chosen `Choice.value`; Esc returns `cancel_value`.

    Title and body may quote provider text (lease ids, GPU names, errors): both are cleaned
    here and shown as plain text, never markup.
    """

    DEFAULT_CSS = CONFIRM_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="confirm-cancel"),
        Binding("left", "app.focus_previous", "previous", show=False, id="confirm-left"),
        Binding("right", "app.focus_next", "next", show=False, id="confirm-right"),
    ]

    def __init__(
        self, title: str, body: str, choices: list[Choice], *, focus: str, cancel_value: str
    ) -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._choices = choices
        self._focus = focus
        self._cancel_value = cancel_value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(clean_line(self._title, TITLE_CHARS)), classes="confirm-title")
            yield Static(Text(clean_lines(self._body, BODY_LINE_CHARS)))
            with Horizontal():
                for choice in self._choices:
                    yield Button(choice.label, id=f"choice-{choice.value}", variant=choice.variant)  # type: ignore[arg-type]

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self._focus}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        button_id = event.button.id or ""
        self.dismiss(button_id.removeprefix("choice-"))

    def action_cancel(self) -> None:
        self.dismiss(self._cancel_value)
