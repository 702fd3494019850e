"""The bridge redacts a node's over-long line before it cuts it: a secret straddling
`max_line_bytes` never keeps a visible prefix (issue 8)."""

from __future__ import annotations

import pytest

from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.secrets import Redactor

SECRET = "hf_4f9c2e7b1a0d5e6f8a7b6c5d4e3f"
LIMIT = 256


def straddling() -> bytes:
    return b"x" * (LIMIT - 12) + SECRET.encode() + b" and more"


@pytest.mark.parametrize("kind", ["stdout", "stderr", "provider"])
def test_an_overlong_line_is_redacted_then_cut(kind: str) -> None:
    hub = ChannelHub()
    bridge = NodeBridge(
        hub, 3, StreamId("3", 77), max_line_bytes=LIMIT, redactor=Redactor([SECRET])
    )
    if kind == "provider":
        frame = bridge.feed_provider_line(straddling().decode())
    else:
        frame = bridge.feed_line(kind, straddling())
    shown = display_text(frame)
    assert SECRET[:8].encode() not in frame.payload and SECRET[:8] not in shown
    assert "<redacted>" in shown


def test_without_secrets_the_cut_is_unchanged() -> None:
    bridge = NodeBridge(ChannelHub(), 3, StreamId("3", 77), max_line_bytes=LIMIT)
    shown = display_text(bridge.feed_line("stdout", b"y" * 400))
    assert shown.startswith("y" * LIMIT) and shown.endswith("[cut 144 bytes]")
