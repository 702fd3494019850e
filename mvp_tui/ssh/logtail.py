"""The node agent's output as complete lines, with byte positions that survive reconnects.

The node-side reader (`follow.py follow`) sends the agent's log bytes as frames from a
byte position. Here they become complete lines for `on_node_line`; each stream's position is
the byte just after the last line delivered, so a reconnect resumes exactly there: partial
lines are held (and re-read after a drop), nothing is lost or delivered twice.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mvp_tui.node import follow

if TYPE_CHECKING:  # types only: the engine imports `LogPositions` before any SSH is used
    import asyncssh

    from mvp_tui.secrets import Redactor

NodeStreamName = Literal["stdout", "stderr"]
NodeLineCallback = Callable[[NodeStreamName, bytes], object]
"""Called with each complete line of the agent's stdout or stderr (without the newline)."""


@dataclass(frozen=True, slots=True)
class LogPositions:
    """Byte positions in the agent's stdout and stderr logs up to which lines were delivered."""

    stdout: int = 0
    stderr: int = 0


class FrameKind(enum.Enum):
    PID = follow.FRAME_PID
    STDOUT = follow.FRAME_STDOUT
    STDERR = follow.FRAME_STDERR
    EXIT = follow.FRAME_EXIT


@dataclass(frozen=True, slots=True)
class HelperFrame:
    kind: FrameKind
    payload: bytes


class FrameError(Exception):
    """The node-side reader sent something that is not a frame."""


async def read_frame(reader: asyncssh.SSHReader[bytes]) -> HelperFrame | None:
    """The next frame, or None when the stream ended (possibly mid-frame: a drop)."""
    try:
        header = await reader.readexactly(follow.HEADER.size)
        kind, length = follow.HEADER.unpack(header)
        if length > follow.MAX_FRAME_BYTES:
            raise FrameError(
                f"the node reader sent a frame of {length} bytes, more than the "
                f"{follow.MAX_FRAME_BYTES} it may"
            )
        payload = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        return None
    try:
        return HelperFrame(FrameKind(kind), payload)
    except ValueError:
        raise FrameError(f"unknown frame kind {kind!r} from the node reader") from None


# Bytes past a long line's cut that are read before it is cut, so that a secret spanning the
# cut has arrived whole and the cut can move in front of it (API keys and tokens are far
# shorter than this).
SECRET_MARGIN_BYTES = 1024


class LineAssembler:
    """Complete lines out of one stream's byte chunks. An over-long line comes in pieces,
    never cut through a known secret: each piece is redacted on its own downstream, and a
    secret in two halves would be recognised in neither."""

    def __init__(
        self,
        name: NodeStreamName,
        position: int,
        max_line: int,
        redactor: Redactor | None = None,
    ) -> None:
        self.name = name
        self.position = position  # just after the last byte delivered
        self._max_line = max_line
        self._redactor = redactor
        self._partial = bytearray()

    def feed(self, data: bytes, deliver: NodeLineCallback) -> None:
        """Deliver every line `data` completes; hold the rest. Over-long lines come in pieces."""
        self._partial += data
        while True:
            end = self._partial.find(b"\n")
            if end < 0 and len(self._partial) >= self._max_line + self._margin():
                cut = self._cut()
                self._deliver(cut, cut, deliver)
                continue
            if end < 0:
                return
            if end > self._max_line:
                cut = self._cut()
                self._deliver(cut, cut, deliver)
                continue
            self._deliver(end, end + 1, deliver)

    def _margin(self) -> int:
        return SECRET_MARGIN_BYTES if self._redactor else 0

    def _cut(self) -> int:
        """Where a long line's next piece ends: at the limit, or before a secret spanning it."""
        if not self._redactor:
            return self._max_line
        window = bytes(self._partial[: self._max_line + SECRET_MARGIN_BYTES])
        return self._redactor.safe_cut(window, self._max_line)

    def flush(self, deliver: NodeLineCallback) -> None:
        """Deliver a last line without newline (the stream ended for good)."""
        if self._partial:
            self._deliver(len(self._partial), len(self._partial), deliver)

    def discard_partial(self) -> None:
        """Forget held bytes (after a drop they are read again from `position`)."""
        self._partial.clear()

    def _deliver(self, line_end: int, consumed: int, deliver: NodeLineCallback) -> None:
        deliver(self.name, bytes(self._partial[:line_end]))
        del self._partial[:consumed]
        self.position += consumed
