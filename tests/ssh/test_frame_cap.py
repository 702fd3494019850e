"""The node-side reader's frames are length-prefixed (32 bits): a length beyond what the
reader (mvp_tui/node/follow.py) ever sends is refused at once, never read into memory (a
hostile node's 4 GiB)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from mvp_tui.node import follow
from mvp_tui.ssh.logtail import FrameError, FrameKind, read_frame


def _reader(data: bytes) -> Any:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    return cast(Any, reader)


async def test_a_frame_longer_than_the_cap_is_a_frame_error() -> None:
    header = follow.HEADER.pack(follow.FRAME_STDOUT, 0xFFFFFFFF)
    # Only the header arrives: a reader that tried to read the payload would wait forever.
    with pytest.raises(FrameError, match="4294967295 bytes"):
        await asyncio.wait_for(read_frame(_reader(header)), 10)
    over = follow.HEADER.pack(follow.FRAME_STDOUT, follow.MAX_FRAME_BYTES + 1)
    with pytest.raises(FrameError):
        await asyncio.wait_for(read_frame(_reader(over)), 10)


async def test_the_helpers_largest_frame_is_read() -> None:
    payload = b"o" * follow.CHUNK
    assert follow.CHUNK <= follow.MAX_FRAME_BYTES
    data = follow.HEADER.pack(follow.FRAME_STDOUT, len(payload)) + payload
    frame = await asyncio.wait_for(read_frame(_reader(data)), 10)
    assert frame is not None and frame.kind is FrameKind.STDOUT and frame.payload == payload
