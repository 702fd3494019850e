"""The node agent's output as complete lines, with byte positions that survive reconnects.

The node-side reader (`node_helper.py follow`) sends the agent's log bytes as frames from a
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

from mvp_tui.ssh import node_helper

if TYPE_CHECKING:  # types only: the engine imports `LogPositions` before any SSH is used
    import asyncssh

NodeStreamName = Literal["stdout", "stderr"]
NodeLineCallback = Callable[[NodeStreamName, bytes], object]
"""Called with each complete line of the agent's stdout or stderr (without the newline)."""


@dataclass(frozen=True, slots=True)
class LogPositions:
    """Byte positions in the agent's stdout and stderr logs up to which lines were delivered."""

    stdout: int = 0
    stderr: int = 0


class FrameKind(enum.Enum):
    PID = node_helper.FRAME_PID
    STDOUT = node_helper.FRAME_STDOUT
    STDERR = node_helper.FRAME_STDERR
    EXIT = node_helper.FRAME_EXIT


@dataclass(frozen=True, slots=True)
class HelperFrame:
    kind: FrameKind
    payload: bytes


class FrameError(Exception):
    """The node-side reader sent something that is not a frame."""


async def read_frame(reader: asyncssh.SSHReader[bytes]) -> HelperFrame | None:
    """The next frame, or None when the stream ended (possibly mid-frame: a drop)."""
    try:
        header = await reader.readexactly(node_helper.HEADER.size)
        kind, length = node_helper.HEADER.unpack(header)
        if length > node_helper.MAX_FRAME_BYTES:
            raise FrameError(
                f"the node reader sent a frame of {length} bytes, more than the "
                f"{node_helper.MAX_FRAME_BYTES} it may"
            )
        payload = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        return None
    try:
        return HelperFrame(FrameKind(kind), payload)
    except ValueError:
        raise FrameError(f"unknown frame kind {kind!r} from the node reader") from None


class LineAssembler:
    """Complete lines out of one stream's byte chunks."""

    def __init__(self, name: NodeStreamName, position: int, max_line: int) -> None:
        self.name = name
        self.position = position  # just after the last byte delivered
        self._max_line = max_line
        self._partial = bytearray()

    def feed(self, data: bytes, deliver: NodeLineCallback) -> None:
        """Deliver every line `data` completes; hold the rest. Over-long lines come in pieces."""
        self._partial += data
        while True:
            end = self._partial.find(b"\n")
            if end < 0 and len(self._partial) >= self._max_line:
                self._deliver(self._max_line, self._max_line, deliver)
                continue
            if end < 0:
                return
            if end > self._max_line:
                self._deliver(self._max_line, self._max_line, deliver)
                continue
            self._deliver(end, end + 1, deliver)

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
