"""The engine-side store of every channel: bounded rings, counts and rates the UI polls.

The UI never gets a message per frame. It polls `version` (bumped on every change), reads
`snapshot()` (per-channel stats, cheap) and asks `tail(channel, since_position)` for what
is new on the one channel it shows. Memory stays bounded whatever the volume: each channel
keeps at most `ring_frames` frames and `ring_bytes` payload bytes, and there are at most
`max_channels` channels besides the engine's own (`mvp.orch.*`, `mvp.provisioning.*`, which
the engine alone writes and so are always open); counts, bytes and positions keep counting.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from mvp_tui.datastream.channels import ENGINE_ONLY_PREFIXES
from mvp_tui.datastream.frame import Frame, StreamId

if TYPE_CHECKING:
    from mvp_tui.datastream.archive import FrameArchive

_new_tuple = tuple.__new__

DEFAULT_RING_FRAMES = 2000
DEFAULT_RING_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_CHANNELS = 256
DEFAULT_RATE_WINDOW_S = 10
DEFAULT_SOURCE = "orchestrator"

FrameListener = Callable[[Frame], None]
"""Called with every frame as it is published (headless mode prints them); must not block."""


class ChannelLimitError(ValueError):
    """A new channel would exceed the hub's `max_channels`."""


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """What the channel list shows for one channel. Times are the hub's clock."""

    channel: str
    count: int
    last_position: int
    total_bytes: int
    first_at: float
    last_at: float
    rate: float  # frames/s over the hub's recent window
    retained: int  # frames still in the ring


@dataclass(frozen=True, slots=True)
class HubSnapshot:
    """All channels' stats at one `version`; `epoch` changes when the hub is reset."""

    version: int
    epoch: int
    channels: tuple[ChannelStats, ...]  # sorted by channel name

    def get(self, channel: str) -> ChannelStats | None:
        return next((c for c in self.channels if c.channel == channel), None)


@dataclass(frozen=True, slots=True)
class Tail:
    """Frames after a position that are still in the ring, and how many left it unseen."""

    frames: list[Frame]
    dropped: int
    last_position: int


class _Channel:
    """Mutable per-channel state; only the hub touches it."""

    __slots__ = (
        "buckets",
        "count",
        "first_at",
        "last_at",
        "last_position",
        "ring",
        "ring_bytes",
        "second",
        "second_count",
        "total_bytes",
    )

    def __init__(self, now: float, window: int) -> None:
        self.ring: deque[Frame] = deque()
        self.ring_bytes = 0
        self.count = 0
        self.total_bytes = 0
        self.last_position = -1
        self.first_at = now
        self.last_at = now
        # Frames per whole second of the clock: the current second counts in `second_count`,
        # finished ones move to `buckets` as (second, count), enough for the rate window.
        self.second = int(now)
        self.second_count = 0
        self.buckets: deque[tuple[int, int]] = deque(maxlen=window)

    def roll(self, second: int) -> None:
        """Start counting a new second."""
        if self.second_count:
            self.buckets.append((self.second, self.second_count))
        self.second = second
        self.second_count = 1

    def recent(self, oldest: int) -> int:
        """Frames counted from second `oldest` on."""
        total = self.second_count if self.second >= oldest else 0
        return total + sum(count for second, count in self.buckets if second >= oldest)


class ChannelHub:
    """Every frame of a run goes through `publish`; positions start at 0 per channel."""

    def __init__(
        self,
        *,
        stream: StreamId | None = None,
        ring_frames: int = DEFAULT_RING_FRAMES,
        ring_bytes: int = DEFAULT_RING_BYTES,
        max_channels: int = DEFAULT_MAX_CHANNELS,
        rate_window_s: int = DEFAULT_RATE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        archive: FrameArchive | None = None,
    ) -> None:
        if ring_frames < 1 or ring_bytes < 1 or max_channels < 1 or rate_window_s < 1:
            raise ValueError(
                "ChannelHub ring_frames, ring_bytes, max_channels and rate_window_s must be ≥ 1"
            )
        self.stream = stream or StreamId("mvp-orchestrator", 0)
        self.ring_frames = ring_frames
        self.ring_bytes = ring_bytes
        self.max_channels = max_channels
        self.rate_window_s = rate_window_s
        self.archive = archive
        self.listeners: list[FrameListener] = []
        self.version = 0
        self.epoch = 0
        self._clock = clock
        self._channels: dict[str, _Channel] = {}
        self._open_count = 0  # channels counted against max_channels

    # -- writing ---------------------------------------------------------------------------

    @overload
    def publish(self, item: Frame, *, source: str = DEFAULT_SOURCE) -> Frame: ...

    @overload
    def publish(
        self,
        item: str,
        payload: bytes,
        *,
        stream: StreamId | None = None,
        source: str = DEFAULT_SOURCE,
        archive_value: str | None = None,
    ) -> Frame: ...

    def publish(
        self,
        item: Frame | str,
        payload: bytes = b"",
        *,
        stream: StreamId | None = None,
        source: str = DEFAULT_SOURCE,
        archive_value: str | None = None,
    ) -> Frame:
        """Store a frame, or a (channel, payload) to which the hub gives the next position.

        A given frame keeps its position when that advances its channel; otherwise it is
        renumbered to the next one, so positions stay monotonic and tail cursors valid.
        The channel name is taken as is: callers holding untrusted names validate them
        first (the bridge does). `archive_value` is the payload's text already as a JSON
        string, when the caller has it (see `FrameArchive.record`).
        """
        if type(item) is str:
            return self.append(item, payload, stream or self.stream, source, archive_value)
        assert isinstance(item, Frame)
        return self.append(
            item.channel, item.payload, item.stream, source, archive_value, item.position
        )

    def append(
        self,
        channel: str,
        payload: bytes,
        stream: StreamId,
        source: str = DEFAULT_SOURCE,
        archive_value: str | None = None,
        position: int = -1,
    ) -> Frame:
        """`publish` with positional arguments only: the ingest hot path (a node's every line)
        calls this, as keyword arguments cost a measurable share of a frame's time.

        `position` is kept when it advances the channel, else the next one is given.
        """
        now = self._clock()
        state = self._channels.get(channel) or self._open(channel, now)
        if position <= state.last_position:
            position = state.last_position + 1
        # What Frame(...) does, minus a Python-level call.
        frame = _new_tuple(Frame, (stream, channel, position, payload))
        size = len(payload)
        ring = state.ring
        ring.append(frame)
        ring_bytes = state.ring_bytes + size
        if len(ring) > self.ring_frames:
            ring_bytes -= len(ring.popleft()[3])  # [3]: the payload, without a property call
        state.ring_bytes = ring_bytes
        if ring_bytes > self.ring_bytes:
            self._evict(state)
        state.count += 1
        state.total_bytes += size
        state.last_position = position
        state.last_at = now
        second = int(now)
        if second == state.second:
            state.second_count += 1
        else:
            state.roll(second)
        self.version += 1
        if self.archive is not None:
            self.archive.record(source, frame, archive_value)
        if self.listeners:
            for listener in self.listeners:
                listener(frame)
        return frame

    def _open(self, channel: str, now: float) -> _Channel:
        engine_only = channel.startswith(ENGINE_ONLY_PREFIXES)
        if not engine_only:
            if self._open_count >= self.max_channels:
                raise ChannelLimitError(
                    f"channel {channel!r} would be channel {self._open_count + 1}, over the "
                    f"hub's limit of {self.max_channels}; fix: fewer distinct channels, or "
                    "raise max_channels"
                )
            self._open_count += 1
        state = _Channel(now, self.rate_window_s)
        self._channels[channel] = state
        return state

    def _evict(self, state: _Channel) -> None:
        ring = state.ring
        while len(ring) > 1 and (
            len(ring) > self.ring_frames or state.ring_bytes > self.ring_bytes
        ):
            state.ring_bytes -= len(ring.popleft().payload)

    def restore_counts(self, channel: str, count: int, total_bytes: int) -> None:
        """Set a channel's running totals (a replay seek rebuilds a hub from a checkpoint:
        the frames before it count without being published again)."""
        state = self._channels[channel]
        state.count = count
        state.total_bytes = total_bytes
        self.version += 1

    def reset(self) -> None:
        """Forget every channel (a replay seeking backwards); `epoch` tells the UI."""
        self._channels.clear()
        self._open_count = 0
        self.epoch += 1
        self.version += 1

    def flush(self) -> None:
        """Push buffered archive records to disk; call it on a timer (~1 s) and at the end."""
        if self.archive is not None:
            self.archive.flush()

    # -- reading (what the UI polls) ------------------------------------------------------

    def has_channel(self, channel: str) -> bool:
        return channel in self._channels

    def can_open(self, channel: str) -> bool:
        """Whether publishing on `channel` would succeed without exceeding `max_channels`."""
        return (
            channel in self._channels
            or channel.startswith(ENGINE_ONLY_PREFIXES)
            or self._open_count < self.max_channels
        )

    def channels(self) -> list[str]:
        return sorted(self._channels)

    def snapshot(self) -> HubSnapshot:
        """Per-channel stats, sorted by name; O(channels), no frame is copied."""
        now = self._clock()
        stats = tuple(
            self._stats(name, self._channels[name], now) for name in sorted(self._channels)
        )
        return HubSnapshot(self.version, self.epoch, stats)

    def _stats(self, name: str, state: _Channel, now: float) -> ChannelStats:
        return ChannelStats(
            channel=name,
            count=state.count,
            last_position=state.last_position,
            total_bytes=state.total_bytes,
            first_at=state.first_at,
            last_at=state.last_at,
            rate=self._rate(state, now),
            retained=len(state.ring),
        )

    def _rate(self, state: _Channel, now: float) -> float:
        window = self.rate_window_s
        oldest = int(now) - window + 1
        recent = state.recent(oldest)
        if not recent:
            return 0.0
        span = min(float(window), now - state.first_at)
        return recent / max(span, 1.0)

    def tail(self, channel: str, since_position: int = -1, limit: int | None = None) -> Tail:
        """Frames with a position after `since_position` still in the ring, oldest first.

        `dropped` counts frames after `since_position` that already left the ring (the UI
        shows "N skipped"); `limit` keeps only the newest ones (they count as dropped too).
        """
        state = self._channels.get(channel)
        if state is None:
            return Tail([], 0, -1)
        newer = list(
            itertools.takewhile(lambda f: f.position > since_position, reversed(state.ring))
        )
        newer.reverse()
        unseen = state.last_position - since_position if since_position >= -1 else state.count
        dropped = max(0, min(unseen, state.count) - len(newer))
        if limit is not None and len(newer) > limit:
            dropped += len(newer) - limit
            newer = newer[len(newer) - limit :]
        return Tail(newer, dropped, state.last_position)
