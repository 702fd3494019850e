"""The wait between two SSH attempts: 1 s, doubling, capped at 30 s (all configurable)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Sleep = Callable[[float], Awaitable[None]]
"""How the session waits (asyncio.sleep in production; tests record the delays)."""

Clock = Callable[[], float]
"""A monotonic clock in seconds (time.monotonic in production)."""


@dataclass(slots=True)
class Backoff:
    """Delays of successive retries: `initial`, then times `factor`, never above `cap`."""

    initial: float = 1.0
    factor: float = 2.0
    cap: float = 30.0
    _next: float | None = None

    def next_delay(self) -> float:
        """The delay before the next try; each call advances the sequence."""
        delay = self.initial if self._next is None else self._next
        delay = min(delay, self.cap)
        self._next = min(delay * self.factor, self.cap)
        return delay

    def reset(self) -> None:
        """Start again from `initial` (after a connection that worked)."""
        self._next = None
