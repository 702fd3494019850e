"""The one modal layout every dialog uses: a title, a body that scrolls, a key hint and a
row of buttons that always shows, at any terminal size from 80x24 up.

The body's height is capped, on every resize, to what the terminal leaves once the title,
hint, buttons and frame are placed; a taller body scrolls inside (up/down/page keys), so
the buttons are never pushed below the screen's edge. The focused button is marked with
`▸ … ◂` (visible in any theme and in a monochrome terminal), and the hint names what Enter
and Esc do now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Static

ResultT = TypeVar("ResultT")

DIALOG_CSS = """
DialogScreen { align: center middle; }
DialogScreen > .dialog {
    width: 96; max-width: 100%; height: auto; max-height: 100%;
    border: thick $warning; background: $surface; padding: 0 1;
}
DialogScreen .dialog-title {
    text-style: bold; height: 1; text-wrap: nowrap; text-overflow: ellipsis;
}
DialogScreen .dialog-body { height: auto; scrollbar-size-vertical: 1; }
DialogScreen .dialog-hint {
    color: $text-muted; height: 1; text-wrap: nowrap; text-overflow: ellipsis;
}
DialogScreen .dialog-buttons { height: auto; align-horizontal: right; }
DialogScreen .dialog-buttons Button { margin-left: 1; min-width: 12; }
DialogScreen .dialog-buttons Button:focus { text-style: bold; }
"""
MARK_LEFT, MARK_RIGHT = "▸ ", " ◂"
CHROME_LINES = 2 + 1 + 1 + 3  # frame, title, hint, buttons: what the body cannot have


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: str
    variant: str = "default"  # Textual button variant


class DialogScreen(ModalScreen[ResultT]):
    """Subclasses give `dialog_title`, `compose_body` and `choices`; a pressed button
    dismisses with `result_for(value)`, Esc with `result_for(cancel_value)`."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="dialog-cancel"),
        Binding("left", "app.focus_previous", "previous button", show=False, id="dialog-left"),
        Binding("right", "app.focus_next", "next button", show=False, id="dialog-right"),
        Binding("up", "scroll_body(-1)", "scroll up", show=False, id="dialog-scroll-up"),
        Binding("down", "scroll_body(1)", "scroll down", show=False, id="dialog-scroll-down"),
        Binding("pageup", "scroll_body(-10)", "page up", show=False, id="dialog-page-up"),
        Binding("pagedown", "scroll_body(10)", "page down", show=False, id="dialog-page-down"),
    ]

    # No auto focus: Textual's would focus the first button as the screen activates, before
    # on_mount's focus of the dialog's own choice lands (a turn later), so the first button
    # was marked for a paint and a quick Enter could pick it.
    AUTO_FOCUS = ""
    dialog_classes = ""  # extra classes on the frame (its border colour, its width)
    button_prefix = "choice-"  # a button's id is this prefix and its choice's value

    def __init__(self, *, focus: str, cancel_value: str) -> None:
        super().__init__()
        self.focus_value = focus
        self.cancel_value = cancel_value

    # -- what a dialog gives --------------------------------------------------------------
    def dialog_title(self) -> RenderableType:
        raise NotImplementedError

    def compose_body(self) -> Iterable[Widget]:
        raise NotImplementedError

    def choices(self) -> list[Choice]:
        raise NotImplementedError

    def result_for(self, value: str) -> ResultT:
        raise NotImplementedError

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(classes=f"dialog {self.dialog_classes}".strip()):
            yield Static(self.dialog_title(), classes="dialog-title")
            with VerticalScroll(classes="dialog-body", can_focus=False):
                yield from self.compose_body()
            yield Static(classes="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                for choice in self.choices():
                    yield Button(
                        choice.label,
                        id=f"{self.button_prefix}{choice.value}",
                        variant=choice.variant,  # type: ignore[arg-type]
                    )

    def on_mount(self) -> None:
        self.query_one(f"#{self.button_prefix}{self.focus_value}", Button).focus()
        self._fit_body()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_body()

    def _fit_body(self) -> None:
        """Cap the body so frame, title, hint and buttons fit on the screen."""
        body = self.query_one(".dialog-body", VerticalScroll)
        body.styles.max_height = max(1, self.size.height - CHROME_LINES)

    # -- the focused button: marked, and named in the hint ---------------------------------
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_focus()

    def _mark_focus(self) -> None:
        focused = self.focused
        labels = {c.value: c.label for c in self.choices()}
        for button in self.query(".dialog-buttons Button").results(Button):
            value = self._value_of(button)
            label = labels.get(value, value)
            button.label = f"{MARK_LEFT}{label}{MARK_RIGHT}" if button is focused else label
        if isinstance(focused, Button):
            value = self._value_of(focused)
            hint = (
                f"Enter: {labels.get(value, value)} · Esc: {labels.get(self.cancel_value, 'close')}"
                " · ←/→ choose"
            )
            self.query_one(".dialog-hint", Static).update(Text(hint))

    def _value_of(self, button: Button) -> str:
        return (button.id or "").removeprefix(self.button_prefix)

    @property
    def focused_value(self) -> str | None:
        focused = self.focused
        return self._value_of(focused) if isinstance(focused, Button) else None

    # -- answers ---------------------------------------------------------------------------
    def act(self, value: str) -> bool:
        """A choice that acts without closing the dialog (Copy): True when handled."""
        return False

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        value = self._value_of(event.button)
        if not self.act(value):
            self.dismiss(self.result_for(value))

    def action_cancel(self) -> None:
        self.dismiss(self.result_for(self.cancel_value))

    def action_scroll_body(self, lines: int) -> None:
        body = self.query_one(".dialog-body", VerticalScroll)
        body.scroll_to(y=body.scroll_y + lines, animate=False)
