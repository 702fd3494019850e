"""The event sink tests await (every suite's one): record everything, wake a waiter when its
event arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mvp_tui.events import EngineEvent, RecordingSink
from mvp_tui.prompt.events import is_end

Predicate = Callable[[EngineEvent], bool]


class WaitingSink(RecordingSink):
    """A `RecordingSink` with `await sink.first(predicate)` instead of sleeps."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[Predicate, asyncio.Future[EngineEvent]]] = []

    def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)
        for predicate, future in self._waiters:
            if not future.done() and predicate(event):
                future.set_result(event)

    async def first(self, predicate: Predicate, within: float = 30.0) -> EngineEvent:
        """The first event (already seen or still to come) that matches."""
        for event in self.events:
            if predicate(event):
                return event
        future: asyncio.Future[EngineEvent] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return await asyncio.wait_for(future, within)

    async def wait_for(self, cls: type[EngineEvent], timeout_s: float = 5.0) -> EngineEvent:
        """The first event of type `cls` (already seen or still to come)."""
        return await self.first(lambda e: isinstance(e, cls), timeout_s)

    async def end_of(self, prompt_id: int, within: float = 30.0) -> EngineEvent:
        """The event that ended `prompt_id`."""
        return await self.first(lambda e: is_end(e) and _id(e) == prompt_id, within)

    def of_prompt(self, prompt_id: int) -> list[EngineEvent]:
        return [e for e in self.events if _id(e) == prompt_id]


def _id(event: EngineEvent) -> int | None:
    value = getattr(event, "prompt_id", None)
    return value if isinstance(value, int) else None
