"""A replay's engine events, read back from the archive's frames.

A live run's engine facts reach the panes as engine events through the engine port; the
orchestrator also writes each of them, typed, on `mvp.orch.events`
(`engine/event_records.py`). This is the one adapter that reads them back into the same
events, which then go through the same port (`engine/ui_port.py`), so a replay fills every
pane by the routes a live run takes, with the facts it had. Answer text is never archived: a
replayed prompt says so.
"""

from __future__ import annotations

import dataclasses

from mvp_tui.datastream import ChannelHub
from mvp_tui.datastream.channels import MVP_ORCH_EVENTS
from mvp_tui.engine.event_records import read_event
from mvp_tui.events import EngineEvent
from mvp_tui.prompt import events as prompt

NOT_ARCHIVED = "*(the answer's text is not archived; only its size and timings)*"


class ArchiveEvents:
    """Polls a replay's hub; `poll()` returns (the hub restarted, new events in order)."""

    def __init__(self) -> None:
        self._version = -1
        self._epoch = -1
        self._position = -1
        self._deltas: set[int] = set()

    def poll(self, hub: ChannelHub) -> tuple[bool, list[EngineEvent]]:
        if hub.version == self._version:
            return False, []
        self._version = hub.version
        restarted = hub.epoch != self._epoch
        if restarted:  # a seek back: the hub was refilled from the start
            self._epoch, self._position, self._deltas = hub.epoch, -1, set()
        if not hub.has_channel(MVP_ORCH_EVENTS):
            return restarted, []
        tail = hub.tail(MVP_ORCH_EVENTS, self._position)
        if tail.last_position >= 0:
            self._position = tail.last_position
        events = [e for e in map(read_event, (f.payload for f in tail.frames)) if e is not None]
        return restarted, [self._answer(e) for e in events]

    def _answer(self, event: EngineEvent) -> EngineEvent:
        """A prompt's first delta says its text is not archived (the others are empty)."""
        if isinstance(event, prompt.TextDelta) and event.prompt_id not in self._deltas:
            self._deltas.add(event.prompt_id)
            return dataclasses.replace(event, text=NOT_ARCHIVED)
        return event
