"""The one port between the run engine and the dashboard: engine events become messages.

The engine runs on the app's loop (a worker), so its sink posts straight into the message
queue; the app hands each event to every pane, which keeps what is for it.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from mvp_tui.events import EngineEvent


class EngineMessage(Message):
    """One engine event, delivered to the app."""

    def __init__(self, event: EngineEvent) -> None:
        super().__init__()
        self.event = event


class ForwardingSink:
    """An EventSink that forwards to a target set later (the app, once it exists); events
    emitted before that are kept and delivered first."""

    def __init__(self) -> None:
        self._target: Callable[[EngineEvent], None] | None = None
        self._early: list[EngineEvent] = []

    def connect(self, target: Callable[[EngineEvent], None]) -> None:
        self._target = target
        early, self._early = self._early, []
        for event in early:
            target(event)

    def __call__(self, event: EngineEvent) -> None:
        if self._target is None:
            self._early.append(event)
        else:
            self._target(event)
