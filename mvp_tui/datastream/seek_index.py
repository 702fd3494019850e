"""Where to start reading an archive to rebuild a hub as it was after any record, fast.

A hub keeps, per channel, only the newest frames (its ring) and running counts. So the hub
after record `n` is: the counts as of a checkpoint before `n`, the frames that were in the
rings at that checkpoint, then the records from the checkpoint to `n` published normally.
A ring is always the longest run of its channel's newest frames within the ring's limits
(frames and bytes), so the scan that builds the index keeps the same rings, of record
offsets instead of frames, to know where each ring starts.

Memory is one checkpoint per `every` records (the counts and ring starts of each channel)
plus one ring of (index, size) per channel as bounded as the hub's own: it does not grow
with the frames, only with the number of checkpoints.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import msgspec

from mvp_tui.datastream.archive import ArchiveError, ArchiveRecord, parse_record_bytes

DEFAULT_EVERY = 4096
_new_tuple = tuple.__new__


class Position(NamedTuple):
    """A place in the archive: before record `record` (0-based), at byte `offset`, which is
    on line `line` (1-based, for error messages). A NamedTuple: one is made per line read."""

    record: int
    offset: int
    line: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The hub's state after `at.record` records, as counts and where its rings start."""

    at: Position
    counts: dict[str, tuple[int, int]]  # channel -> (frames, payload bytes) so far
    ring_starts: dict[str, int]  # channel -> index of the oldest record still in its ring
    start: Position  # the oldest of those: where a rebuild starts reading


def scan_lines(path: Path, start: Position) -> Iterator[tuple[int, int, int, bytes]]:
    """Every non-blank line from `start` on as (record index, offset, line number, line)."""
    try:
        handle = path.open("rb")
    except OSError as error:
        raise ArchiveError(
            f"open frame archive {path}: {error.strerror or error}; fix: check the path"
        ) from error
    index, offset, number = start
    with handle:
        handle.seek(offset)
        for line in handle:
            if line.strip():
                yield index, offset, number, line
                index += 1
            offset += len(line)
            number += 1


def scan(path: Path, start: Position) -> Iterator[tuple[Position, ArchiveRecord, Position]]:
    """Every record from `start` on, with its position and the position after its line;
    ArchiveError naming the line for a line that is not a record (a last line cut short
    without its newline, the mark of a crash mid-write, is skipped)."""
    for index, offset, number, line in scan_lines(path, start):
        try:
            record = parse_record_bytes(line)
        except ValueError as error:
            if not line.endswith(b"\n"):
                return  # torn final write
            raise ArchiveError(
                f"{path}:{number}: not a frame archive record ({error}); fix: remove "
                "or repair that line, or point at an archive written by mvp-tui"
            ) from None
        at = _new_tuple(Position, (index, offset, number))
        yield at, record, _new_tuple(Position, (index + 1, offset + len(line), number + 1))


class _ChannelOnly(msgspec.Struct):
    channel: str


_decode_channel = msgspec.json.Decoder(_ChannelOnly).decode


def channel_of(line: bytes) -> str:
    """The channel of an archive line already read once (by the index), decoding no more of
    it than that: a rebuild skips most of the lines it passes."""
    try:
        return _decode_channel(line).channel
    except (msgspec.MsgspecError, ValueError):
        return parse_record_bytes(line).frame.channel


@dataclass(slots=True)
class _Ring:
    """A channel's ring as the hub keeps it, holding (record index, offset, line, size)."""

    items: deque[tuple[int, int, int, int]] = field(default_factory=deque)
    size: int = 0
    count: int = 0
    total: int = 0


class SeekIndex:
    """Checkpoints of an archive for a hub with these ring limits, built by `extend`."""

    def __init__(
        self, path: Path, ring_frames: int, ring_bytes: int, *, every: int = DEFAULT_EVERY
    ) -> None:
        self.path = path
        self.ring_frames = ring_frames
        self.ring_bytes = ring_bytes
        self.every = max(1, every)
        self.checkpoints: list[Checkpoint] = []
        self.end: Position = Position(0, 0, 1)  # how far the scan got
        self.complete = False
        self._rings: dict[str, _Ring] = {}
        self._records: Iterator[tuple[Position, ArchiveRecord, Position]] | None = None

    def extend(self, until: int | None = None, *, budget: int | None = None) -> None:
        """Scan on until record `until` (None: the end), or `budget` records at most."""
        if self._records is None:
            self._records = scan(self.path, self.end)
            self._checkpoint()
        scanned = 0
        while not self.complete and (until is None or self.end.record < until):
            if budget is not None and scanned >= budget:
                return
            item = next(self._records, None)
            if item is None:
                self.complete = True
                return
            at, record, self.end = item
            self._add(at, record)
            scanned += 1
            if self.end.record % self.every == 0:
                self._checkpoint()

    def _add(self, at: Position, record: ArchiveRecord) -> None:
        frame = record.frame
        ring = self._rings.get(frame.channel)
        if ring is None:
            ring = self._rings[frame.channel] = _Ring()
        size = len(frame.payload)
        ring.items.append((at.record, at.offset, at.line, size))
        ring.size += size
        ring.count += 1
        ring.total += size
        # The hub's eviction: one frame over the count, then bytes, keeping at least one.
        if len(ring.items) > self.ring_frames:
            ring.size -= ring.items.popleft()[3]
        while len(ring.items) > 1 and ring.size > self.ring_bytes:
            ring.size -= ring.items.popleft()[3]

    def _checkpoint(self) -> None:
        counts = {name: (ring.count, ring.total) for name, ring in self._rings.items()}
        starts = {name: ring.items[0] for name, ring in self._rings.items()}
        oldest = min(starts.values(), default=None)
        start = Position(*oldest[:3]) if oldest is not None else self.end
        ring_starts = {name: item[0] for name, item in starts.items()}
        self.checkpoints.append(Checkpoint(self.end, counts, ring_starts, start))

    def before(self, index: int) -> Checkpoint:
        """The last checkpoint at or before record `index` (extend first to reach it)."""
        at = bisect.bisect_right([c.at.record for c in self.checkpoints], index) - 1
        return self.checkpoints[max(at, 0)]
