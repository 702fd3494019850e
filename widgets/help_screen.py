"""The `?` help screen: every key, what it does, and its id for `[ui.keys]`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Static

from mvp_tui.keymap import KeyBinding
from mvp_tui.widgets.dialog import Choice, DialogScreen

HELP_CSS = """
HelpScreen > .dialog { border: round $accent; }
"""


def key_label(keys: str) -> str:
    """Textual key names as a person reads them: `question_mark` → `?`, `ctrl+d` stays."""
    names = {
        "question_mark": "?",
        "slash": "/",
        "colon": ":",
        "enter": "Enter",
        "tab": "Tab",
        "shift+tab": "Shift+Tab",
        "comma": ",",
        "full_stop": ".",
        "plus": "+",
        "minus": "-",
        "escape": "Esc",
        "space": "Space",
        "pageup": "PgUp",
        "pagedown": "PgDn",
        "up": "↑",
        "down": "↓",
        "left": "←",
        "right": "→",
    }
    return " / ".join(names.get(k.strip(), k.strip()) for k in keys.split(","))


class HelpScreen(DialogScreen[None]):
    DEFAULT_CSS = HELP_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "cancel", "close", id="help-close"),
    ]

    def __init__(self, bindings: list[KeyBinding], remapped: dict[str, str]) -> None:
        super().__init__(focus="close", cancel_value="close")
        self._key_specs = bindings
        self._remapped = remapped

    def rows(self) -> list[tuple[str, str, str]]:
        """(keys as shown, what it does, binding id), remaps applied."""
        return [
            (key_label(self._remapped.get(b.id, b.keys)), b.description, b.id)
            for b in self._key_specs
        ]

    def dialog_title(self) -> Text:
        return Text(f"Keys ({len(self._key_specs)}; ↑/↓ scroll)")

    def compose_body(self) -> Iterable[Widget]:
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("does")
        # Text, not strings: a Rich table reads a string as markup ("[ui.keys]" would vanish).
        table.add_column(Text("id ([ui.keys])"), style="dim", no_wrap=True)
        for row in self.rows():
            table.add_row(*(Text(cell) for cell in row))
        yield Static(table, id="help-table")
        yield Static(
            Text('Remap any key in config.toml by its id, e.g.  [ui.keys]  search-offers = "f5"'),
            classes="help-foot",
        )

    def choices(self) -> list[Choice]:
        return [Choice("close", "Close", "primary")]

    def result_for(self, value: str) -> None:
        return None
