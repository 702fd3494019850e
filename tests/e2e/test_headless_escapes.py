"""`--headless` prints node payloads as JSON lines on the user's terminal: characters a
terminal obeys or hides (C1 controls such as the 8-bit CSI, bidi overrides, zero-width) go out
escaped, so the line means the same to a JSON reader and nothing to the terminal."""

from __future__ import annotations

import io
import json

import pytest

from mvp_tui.datastream.frame import Frame, node_stream
from mvp_tui.engine.headless import JsonLines
from mvp_tui.secrets import Redactor

RAW = "a\x9b2Jb\x85c\u202ed\u200be\u2028f ünï ✓"


def test_c1_controls_and_invisible_characters_are_escaped_and_round_trip() -> None:
    out = io.StringIO()
    lines = JsonLines(out, Redactor([]))
    lines.write({"event": "x", "text": RAW})
    line = out.getvalue()
    for char in "\x9b\x85\u202e\u200b\u2028":
        assert char not in line
    assert "\\u009b" in line and "\\u202e" in line
    assert "ünï ✓" in line  # other text stays readable, not ASCII-escaped
    assert json.loads(line)["text"] == RAW


@pytest.mark.parametrize("payload", [RAW.encode(), json.dumps({"msg": RAW}).encode()])
def test_a_node_frame_reaches_stdout_without_raw_c1(payload: bytes) -> None:
    out = io.StringIO()
    frame = Frame(node_stream(1, 0), "mvp.node.0.engine", 1, payload)
    JsonLines(out, Redactor([])).frame(frame)
    assert not any(0x80 <= ord(c) <= 0x9F for c in out.getvalue())
