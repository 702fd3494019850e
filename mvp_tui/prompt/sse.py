"""Server-sent events: turn a stream of text lines into (event name, data) pairs.

Follows the WHATWG rules the OpenAI-compatible servers rely on: `data:` lines accumulate until
a blank line dispatches them, `:` lines are comments (sse-starlette's pings), and a final
event without its blank line still counts when the stream ends cleanly.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its `event:` name ("message" when none) and its data."""

    event: str
    data: str


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[SseEvent]:
    """Yield each event of an SSE body given as lines (without their line endings)."""
    data: list[str] = []
    event = ""
    async for line in lines:
        if not line:
            if data:
                yield SseEvent(event or "message", "\n".join(data))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SseEvent(event or "message", "\n".join(data))
