"""The engine events an archive keeps, as typed records on `mvp.orch.events`.

The orchestrator (`engine/orch.py`) writes each event a pane reads (`engine/ui_port.py`
`UI_EVENTS`) as `{"type": "OrchEvent", "event": <kind>, "detail": <its fields>}`, the
fields as msgspec encodes the event's dataclass (enums as their values); a replay
(`tui/replay_events.py`) decodes each back into the same type. The panes are filled by the
facts a live run gave them: no field is named twice, no prose is parsed.

The answer's text is never archived (only its size and timings): deltas and final texts
are written empty.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import msgspec

from mvp_tui.engine import events
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease_events
from mvp_tui.prompt import events as prompt_events
from mvp_tui.ssh import events as ssh_events

RECORD_TYPE = "OrchEvent"
# The modules that define engine events (imported here so each type is known by its kind).
EVENT_MODULES = (lease_events, ssh_events, events, prompt_events)
# Fields that hold the answer's text: never archived.
_ANSWER_TEXT = ("text", "final_text", "partial_text")
_ANSWERS = (prompt_events.TextDelta, prompt_events.PromptDone, prompt_events.PromptFault,
            prompt_events.PromptCancelled)


def event_types() -> dict[str, type[EngineEvent]]:
    """Every engine event type, by its `kind` (those `EVENT_MODULES` define)."""
    return {
        value.kind: value
        for module in EVENT_MODULES
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, EngineEvent)
        and value.__module__ == module.__name__
    }


def event_record(event: EngineEvent) -> dict[str, Any]:
    """The record of one event, its answer text left out."""
    if isinstance(event, _ANSWERS):
        blank = {f: "" for f in _ANSWER_TEXT if hasattr(event, f)}
        event = dataclasses.replace(event, **blank)  # type: ignore[arg-type]
    return {"type": RECORD_TYPE, "event": event.kind, "detail": msgspec.to_builtins(event)}


class _EventRecord(msgspec.Struct):
    type: str
    event: str
    detail: msgspec.Raw


_read_record = msgspec.json.Decoder(_EventRecord).decode


@functools.cache
def _decoders() -> dict[str, msgspec.json.Decoder[EngineEvent]]:
    return {kind: msgspec.json.Decoder(cls) for kind, cls in event_types().items()}


def read_event(payload: bytes) -> EngineEvent | None:
    """The event a record holds; None when it is not one this version knows (a record of a
    newer kind, or fields of another shape: the archive is a file)."""
    try:
        record = _read_record(payload)
        decoder = _decoders().get(record.event) if record.type == RECORD_TYPE else None
        return None if decoder is None else decoder.decode(record.detail)
    except msgspec.MsgspecError:
        return None
