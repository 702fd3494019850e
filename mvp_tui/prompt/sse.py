"""Server-sent events: turn the lines of a stream into (event name, data) pairs.

Follows the WHATWG rules the OpenAI-compatible servers rely on: `data:` lines accumulate until
a blank line dispatches them, `:` lines are comments (sse-starlette's pings), and a final
event without its blank line still counts when the stream ends cleanly. A plain object fed
line by line (no generator layer) because it runs once per streamed token.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its `event:` name ("message" when none) and its data."""

    event: str
    data: str


class SseParser:
    """Feed it lines (without line endings); it returns each event as it completes."""

    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""

    @property
    def empty(self) -> bool:
        """No event is building (no `data:` or `event:` line since the last dispatch)."""
        return not self._data and not self._event

    def feed(self, line: str) -> SseEvent | None:
        """Take one line; the event it completes (on a blank line), else None."""
        if not line:
            return self.flush()
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def flush(self) -> SseEvent | None:
        """The pending event, if any (at a blank line or the end of the stream)."""
        if not self._data:
            self._event = ""
            return None
        event = SseEvent(self._event or "message", "\n".join(self._data))
        self._data, self._event = [], ""
        return event
