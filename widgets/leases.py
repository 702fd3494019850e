"""The Leases pane: each create attempt and its answer, then every lease with spend."""

from __future__ import annotations

from mvp_tui.widgets.pane import Pane


class LeasesPane(Pane):
    TITLE = "Leases"
    EMPTY_TEXT = (
        "Each lease attempt appears here as it happens (created, unavailable, adopted, "
        "deleted), then every live lease with its uptime and spend. Pick an offer and "
        "press Enter to start."
    )

    def __init__(self, *, id: str | None = "leases-pane") -> None:
        super().__init__(id=id)
