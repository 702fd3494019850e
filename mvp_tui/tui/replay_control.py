"""What the dashboard holds in replay mode: the archive's source, its hub and position."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.replay import ReplaySource
from mvp_tui.untrusted import clean_line

SPEED_RANGE = (0.125, 64.0)


class ReplayControl:
    def __init__(self, path: Path, total: int, *, speed: float = 1.0) -> None:
        self.path = path
        self.total = total
        self.hub = ChannelHub()
        self.source = ReplaySource(path, speed)

    async def feed(self) -> int:
        return await self.source.feed(self.hub, hold_at_end=True)

    def toggle_pause(self) -> None:
        if self.source.paused:
            self.source.resume()
        else:
            self.source.pause()

    def seek_step(self, direction: int) -> None:
        """Move a tenth of the archive back (-1) or forward (+1)."""
        step = max(1, self.total // 10)
        target = min(self.total, max(0, self.source.index + direction * step))
        self.source.seek(target)

    def scale_speed(self, factor: float) -> None:
        low, high = SPEED_RANGE
        self.source.speed = min(high, max(low, self.source.speed * factor))

    def describe(self) -> str:
        state = "paused" if self.source.paused else ("ended" if self.source.finished else "playing")
        return (
            f"replay {clean_line(self.path.name, 80)} · {self.source.speed:g}× · "
            f"frame {self.source.index}/{self.total} · {state}"
        )
