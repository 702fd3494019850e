"""A provider proxy for benches: forwards every call and adds up the time spent awaiting them,
so a bench can split its wall time into provider round trips and mvp-tui's own work."""

from __future__ import annotations

import asyncio
import time
from typing import Any


class TimedProvider:
    """Forwards every Provider attribute; coroutine methods are timed (`spent_s`) and counted
    (`calls`), everything else (plain methods, `info`) passes through untouched."""

    def __init__(self, inner: Any, *, time_sync: bool = False) -> None:
        self.inner = inner
        self.time_sync = time_sync  # plain methods timed too (the RunPod bench's catalog reads)
        self.info = inner.info
        self.spent_s = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(target):
            if not (self.time_sync and callable(target)):
                return target

            def timed_sync(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return target(*args, **kwargs)
                finally:
                    self.spent_s += time.perf_counter() - started
                    self.calls += 1

            return timed_sync

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await target(*args, **kwargs)
            finally:
                self.spent_s += time.perf_counter() - started
                self.calls += 1

        return timed
