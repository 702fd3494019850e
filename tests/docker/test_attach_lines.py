"""The attach stream's line splitting (no daemon): an over-long line is delivered cut, with
a marker, and the rest of it up to its newline is skipped, not delivered as a line of its own
that would begin with the tail of whatever the cut went through (a secret's, say)."""

from __future__ import annotations

import asyncio

from mvp_tui.providers.docker.node import AttachedNode
from mvp_tui.providers.local.node import CUT_MARKER, MAX_LINE_BYTES

SECRET = b"hf_4f9c2e7b1a0d5e6f8a7b6c5d4e3f"


async def test_the_rest_of_a_cut_line_is_skipped_up_to_its_newline() -> None:
    lines: list[bytes] = []
    done = asyncio.Event()

    def on_line(_kind: str, line: bytes) -> None:
        lines.append(line)
        if line == b"next":
            done.set()

    node = AttachedNode(None, "c-1", on_line)
    long_line = b"x" * (MAX_LINE_BYTES - 8) + SECRET + b"y" * 5000
    for start in range(0, len(long_line), 65536):  # as the attach frames bring it
        node._split("stdout", long_line[start : start + 65536])
    node._split("stdout", b"\nnext\n")
    await asyncio.wait_for(done.wait(), 10)
    assert len(lines) == 2 and lines[1] == b"next"
    assert lines[0] == long_line[:MAX_LINE_BYTES] + CUT_MARKER
    assert not any(line.startswith(SECRET[8:16]) or b"y" * 10 in line for line in lines)
