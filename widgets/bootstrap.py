"""The Bootstrap pane: SSH tries with back-off and the node's start-up phases."""

from __future__ import annotations

from mvp_tui.widgets.pane import Pane


class BootstrapPane(Pane):
    TITLE = "Bootstrap"
    EMPTY_TEXT = (
        "Once a lease runs: SSH attempts with their back-off, the node agent starting, "
        "the model loading and the engine's health. Nothing to bootstrap yet."
    )

    def __init__(self, *, id: str | None = "bootstrap-pane") -> None:
        super().__init__(id=id)
