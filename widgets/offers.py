"""The Offers pane: every provider's machines, filtered and sorted, picked by keyboard."""

from __future__ import annotations

from mvp_tui.widgets.pane import Pane


class OffersPane(Pane):
    TITLE = "Offers"
    EMPTY_TEXT = (
        "Offers from {provider} appear here, filtered by your limits and sorted by $/h. "
        "Press r to search, / to filter, space to pick a fallback order, Enter to lease."
    )

    def __init__(self, *, provider: str, id: str | None = "offers-pane") -> None:
        self.provider = provider
        super().__init__(id=id)

    def empty_text(self) -> str:
        return self.EMPTY_TEXT.format(provider=self.provider)
