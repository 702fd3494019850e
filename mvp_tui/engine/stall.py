"""The token-progress watchdog: a frozen node stalls generation while `/health` says ok.

llama.cpp's server keeps answering `/health` when an RPC worker is frozen (SIGSTOP, a hung
GPU): the stream just stops. `StallWatch` sees the prompt events on their way to the sink;
while a prompt is active and no token arrived for `[prompt] stall_secs`, `watch()` raises
`StallDetected`, which the run turns into a failure (and a confirmed teardown).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.prompt.events import (
    FaultKind,
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptStarted,
    TextDelta,
)

_ENDS = (PromptDone, PromptFault, PromptCancelled)
# A stream that broke, or an engine that stopped listening: the engine went away.
ENGINE_LOST = (FaultKind.STREAM_ENDED_EARLY, FaultKind.CONNECTION_REFUSED)


class StallDetected(Exception):
    """No token for `stall_secs` while a prompt was active."""

    def __init__(self, prompt_id: int, silent_s: float, stall_secs: float) -> None:
        super().__init__(
            f"prompt {prompt_id} got no token for {silent_s:.1f} s ([prompt] stall_secs = "
            f"{stall_secs:g}) while the engine still answered: a node of the run is frozen"
        )
        self.prompt_id = prompt_id


class StallWatch:
    """Wraps the prompt queue's sink (`tap`) and watches token progress (`watch`)."""

    def __init__(
        self, stall_secs: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stall_secs = stall_secs
        self._clock = clock
        self._active: int | None = None
        self._last = 0.0
        self._progress = asyncio.Event()  # a prompt started, a token came, or a prompt ended
        self.engine_lost: PromptFault | None = None  # the first prompt the engine dropped

    def tap(self, sink: EventSink) -> EventSink:
        def forward(event: EngineEvent) -> None:
            self.observe(event)
            sink(event)

        return forward

    def observe(self, event: EngineEvent) -> None:
        if isinstance(event, PromptStarted):
            self._active = event.prompt_id
        elif isinstance(event, TextDelta):
            pass
        elif isinstance(event, _ENDS):
            if isinstance(event, PromptFault) and event.fault_kind in ENGINE_LOST:
                self.engine_lost = self.engine_lost or event
            if event.prompt_id == self._active:
                self._active = None
        else:
            return
        self._last = self._clock()
        self._progress.set()

    async def watch(self) -> None:
        """Returns never; raises StallDetected. Waits forever when the watchdog is off."""
        stall = self.stall_secs
        if not stall:
            await asyncio.Event().wait()
            return
        while True:
            self._progress.clear()
            if self._active is None:
                await self._progress.wait()
                continue
            silent = self._clock() - self._last
            if silent >= stall:
                raise StallDetected(self._active, silent, stall)
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
            # lands as the event is set, and this task would never end.
            try:
                async with asyncio.timeout(stall - silent):
                    await self._progress.wait()
            except TimeoutError:
                continue  # re-checked above: a token may have come at the deadline
