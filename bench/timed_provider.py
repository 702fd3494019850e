"""A provider proxy for benches: forwards every call and adds up the time spent awaiting them,
so a bench can split its wall time into provider round trips and mvp-tui's own work."""

from __future__ import annotations

import asyncio
import time
from typing import Any


class TimedProvider:
    """Forwards every Provider attribute; coroutine methods are timed (`spent_s`) and counted
    (`calls`), everything else (plain methods, `info`) passes through untouched."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.info = inner.info
        self.spent_s = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(target):
            return target

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await target(*args, **kwargs)
            finally:
                self.spent_s += time.perf_counter() - started
                self.calls += 1

        return timed
