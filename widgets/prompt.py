"""The Prompt pane: a live prompt box streaming tokens from the node's model."""

from __future__ import annotations

from mvp_tui.widgets.pane import Pane


class PromptPane(Pane):
    TITLE = "Prompt"
    EMPTY_TEXT = (
        "Tokens stream here from the model served on the node, with tok/s and TTFT. Lease"
        " a node first (Enter on an offer); the prompt box opens when the engine is "
        "ready."
    )

    def __init__(self, *, id: str | None = "prompt-pane") -> None:
        super().__init__(id=id)
