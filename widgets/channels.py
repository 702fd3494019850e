"""The Channels pane: every datastream channel with its frame count and rate."""

from __future__ import annotations

from mvp_tui.widgets.pane import Pane


class ChannelsPane(Pane):
    TITLE = "Channels"
    EMPTY_TEXT = (
        "Datastream channels (bootstrap phases, node logs, weights) appear here with "
        "frame counts and rates once a node starts. Enter opens a channel's log."
    )

    def __init__(self, *, id: str | None = "channels-pane") -> None:
        super().__init__(id=id)
