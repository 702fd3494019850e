"""A one-line filter input (the k9s `/` habit): typing filters live, Enter keeps, Esc clears."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """Posts `FilterBar.Cleared` on Esc; live text arrives as the usual `Input.Changed`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "clear filter", id="filter-clear"),
    ]

    class Cleared(Message):
        """The user dropped the filter."""

    def __init__(self, *, placeholder: str, id: str | None = None) -> None:
        super().__init__(placeholder=placeholder, id=id, compact=True, select_on_focus=False)

    def action_clear_filter(self) -> None:
        # The owner empties the input (without a Changed round trip) when it handles this.
        self.post_message(self.Cleared())

    def clear_quietly(self) -> None:
        """Empty the input without posting `Input.Changed`."""
        with self.prevent(Input.Changed):
            self.value = ""
