"""Replay an archived run into a hub: original pacing (scaled), pause/resume, seek.

Read-only by construction: this module reads an archive file and publishes into a hub; it
imports nothing that can reach a provider or a node.

Pacing uses each record's `"t"` (archives written with `timing=True`); for records without
it (the seed's format), frames follow in arrival order, one `untimed_step_s` apart.
Gaps longer than `max_gap_s` are shortened to it, so a replay of a long idle wait stays
watchable. `seek(n)` rebuilds the hub as it was after the first `n` records (for a
single-run archive, up to arrival_seq `n`), without pacing: from the nearest checkpoint of a
`SeekIndex` (built in the background as the replay starts), so a seek anywhere in a long
archive reads only the frames still in the rings there and the records since the checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from mvp_tui.datastream.archive import ArchiveError, ArchiveRecord, parse_record_bytes
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.seek_index import (
    DEFAULT_EVERY,
    Checkpoint,
    Position,
    SeekIndex,
    channel_of,
    scan,
    scan_lines,
)

Sleep = Callable[[float], Awaitable[None]]

DEFAULT_UNTIMED_STEP_S = 0.02
DEFAULT_MAX_GAP_S = 5.0
INDEX_CHUNK = 5_000  # records the background indexer scans between yields (~10 ms)
START = Position(0, 0, 1)


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
        index_every: int = DEFAULT_EVERY,
    ) -> None:
        self.path = Path(path)
        self.speed = speed
        self.untimed_step_s = untimed_step_s
        self.max_gap_s = max_gap_s
        self.index_every = index_every  # records between seek checkpoints
        self.index = 0  # records published so far == the next record's ordinal
        self.finished = False
        self._sleep = sleep
        self._records: Iterator[tuple[Position, ArchiveRecord, Position]] = iter(())
        self._index: SeekIndex | None = None
        self._indexer: asyncio.Task[None] | None = None
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
        self._index = SeekIndex(self.path, hub.ring_frames, hub.ring_bytes, every=self.index_every)
        self._indexer = asyncio.create_task(self._build_index(self._index))
        try:
            return await self._run(hub, hold_at_end)
        finally:
            self._indexer.cancel()

    async def _build_index(self, index: SeekIndex) -> None:
        """Index the whole archive in chunks, yielding to the loop between them. A bad line
        stops it quietly: the replay reaching that line reports it."""
        with contextlib.suppress(ArchiveError):
            while not index.complete:
                index.extend(budget=INDEX_CHUNK)
                await asyncio.sleep(0)

    async def _run(self, hub: ChannelHub, hold_at_end: bool) -> int:
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
        self._records = scan(self.path, START)
        self._pending = None
        self._previous = None
        self.index = 0
        self.finished = False

    def _apply_seek(self, hub: ChannelHub, target: int) -> None:
        self._seek_to = None
        index = self._index
        near = index is None or self.index <= target < self.index + index.every
        if not near and index is not None:
            index.extend(until=target)
            checkpoint = index.before(target)
            if checkpoint.at.record > self.index or target < self.index:
                self._rebuild(hub, checkpoint)
        while self.index < target:
            record = self._next()
            if record is None:
                break
            self._publish(hub, record)
        self._previous = None  # no pause before the first frame after a seek

    def _rebuild(self, hub: ChannelHub, checkpoint: Checkpoint) -> None:
        """The hub as it was at `checkpoint`: its rings' frames, then its counts."""
        hub.reset()
        ring_starts = checkpoint.ring_starts
        at = checkpoint.at.record
        for index, _, _, line in scan_lines(self.path, checkpoint.start):
            if index >= at:
                break
            # Older than its channel's ring at the checkpoint: counted below, not shown
            # (and not decoded further: the index has read every line up to here once).
            if index >= ring_starts[channel_of(line)]:
                record = parse_record_bytes(line)
                hub.publish(record.frame, source=record.source)
        for channel, (count, total_bytes) in checkpoint.counts.items():
            hub.restore_counts(channel, count, total_bytes)
        self._records = scan(self.path, checkpoint.at)
        self._pending = None
        self.finished = False
        self.index = at

    def _next(self) -> ArchiveRecord | None:
        if self._pending is None:
            item = next(self._records, None)
            self._pending = item[1] if item is not None else None
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
