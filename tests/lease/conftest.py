"""Fixtures of the lease tests: a record store in tmp_path and millisecond timings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mvp_tui.events import EngineEvent, RecordingSink
from mvp_tui.lease import RecordStore, WalkSettings


class WaitingSink(RecordingSink):
    """A recording sink a test can await: `await sink.wait_for(LeasePending)`."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = asyncio.Event()

    def __call__(self, event: EngineEvent) -> None:
        super().__call__(event)
        self._changed.set()

    async def wait_for(self, cls: type[EngineEvent], timeout_s: float = 5.0) -> EngineEvent:
        async with asyncio.timeout(timeout_s):
            while not self.of(cls):
                self._changed.clear()
                await self._changed.wait()
        return self.of(cls)[0]


def fast_settings(**overrides: object) -> WalkSettings:
    """Production logic with millisecond waits."""
    values: dict[str, object] = {
        "reconcile_waits_s": (0.0, 0.01),
        "poll_interval_s": 0.005,
        "ready_timeout_s": 0.5,
        "delete_timeout_s": 0.3,
        "delete_poll_s": 0.005,
        "destroy_attempts": 4,
        "destroy_backoff_s": 0.001,
        "destroy_backoff_max_s": 0.004,
        "image": "ghcr.io/example/node:1",
        "disk_gb": 20,
    }
    values.update(overrides)
    return WalkSettings(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    return RecordStore(tmp_path / "state")
