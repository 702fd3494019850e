"""Replay an archived run into a hub: original pacing (scaled), pause/resume, seek.

Read-only by construction: this module reads an archive file and publishes into a hub; it
imports nothing that can reach a provider or a node.

Pacing uses each record's `"t"` (archives written with `timing=True`); for records without
it (the seed's format), frames follow in arrival order, one `untimed_step_s` apart.
Gaps longer than `max_gap_s` are shortened to it, so a replay of a long idle wait stays
watchable. `seek(n)` rebuilds the hub as it was after the first `n` records (for a
single-run archive, up to arrival_seq `n`), without pacing.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from mvp_tui.datastream.archive import ArchiveRecord, read_archive
from mvp_tui.datastream.hub import ChannelHub

Sleep = Callable[[float], Awaitable[None]]

DEFAULT_UNTIMED_STEP_S = 0.02
DEFAULT_MAX_GAP_S = 5.0


class ReplaySource:
    """Feeds an archive's frames into a hub at `speed`× their original pace."""

    def __init__(
        self,
        path: Path | str,
        speed: float = 1.0,
        *,
        sleep: Sleep = asyncio.sleep,
        untimed_step_s: float = DEFAULT_UNTIMED_STEP_S,
        max_gap_s: float = DEFAULT_MAX_GAP_S,
    ) -> None:
        self.path = Path(path)
        self.speed = speed
        self.untimed_step_s = untimed_step_s
        self.max_gap_s = max_gap_s
        self.index = 0  # records published so far == the next record's ordinal
        self.finished = False
        self._sleep = sleep
        self._records: Iterator[ArchiveRecord] = iter(())
        self._pending: ArchiveRecord | None = None
        self._previous: ArchiveRecord | None = None
        self._paused = False
        self._seek_to: int | None = None
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()
        """Set while `feed` waits for `resume()` or `seek()`: the hub is then steady."""

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"replay speed {value!r}: must be > 0 (1.0 = original pace)")
        self._speed = value

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self.idle.clear()
        self._wake.set()

    def seek(self, index: int) -> None:
        """Jump so that exactly the first `index` records are in the hub (applied by feed)."""
        if index < 0:
            raise ValueError(f"seek to {index}: a record index is ≥ 0")
        self._seek_to = index
        self.idle.clear()
        self._wake.set()

    async def feed(self, hub: ChannelHub, *, hold_at_end: bool = False) -> int:
        """Publish the archive into `hub` until its end; returns how many records it has.

        With `hold_at_end` (the dashboard), reaching the end waits (`idle` set) for a seek
        instead of returning, so the viewer can still go back.
        """
        self._restart(hub)
        while True:
            if self._seek_to is not None:
                self._apply_seek(hub, self._seek_to)
                continue
            if self._paused:
                await self._wait_for_wake()
                continue
            record = self._next()
            if record is None:
                self.finished = True
                if not hold_at_end:
                    return self.index
                await self._wait_for_wake()
                if self._seek_to is not None and self._seek_to < self.index:
                    self.finished = False
                continue
            delay = self._delay(record)
            if delay > 0:
                await self._sleep(delay)
                if self._seek_to is not None or self._paused:
                    continue  # `record` stays pending for after the seek / resume
            self._publish(hub, record)

    async def _wait_for_wake(self) -> None:
        self._wake.clear()
        self.idle.set()
        try:
            await self._wake.wait()
        finally:
            self.idle.clear()

    def _restart(self, hub: ChannelHub) -> None:
        if self.index or self.finished:
            hub.reset()
        self._records = read_archive(self.path)
        self._pending = None
        self._previous = None
        self.index = 0
        self.finished = False

    def _apply_seek(self, hub: ChannelHub, target: int) -> None:
        self._seek_to = None
        if target < self.index:
            self._restart(hub)
        while self.index < target:
            record = self._next()
            if record is None:
                break
            self._publish(hub, record)
        self._previous = None  # no pause before the first frame after a seek

    def _next(self) -> ArchiveRecord | None:
        if self._pending is None:
            self._pending = next(self._records, None)
        return self._pending

    def _publish(self, hub: ChannelHub, record: ArchiveRecord) -> None:
        hub.publish(record.frame, source=record.source)
        self._previous = record
        self._pending = None
        self.index += 1

    def _delay(self, record: ArchiveRecord) -> float:
        previous = self._previous
        if previous is None or math.isinf(self._speed):
            return 0.0
        if record.t is not None and previous.t is not None:
            gap = record.t - previous.t
        else:
            gap = self.untimed_step_s
        return min(max(gap, 0.0), self.max_gap_s) / self._speed
