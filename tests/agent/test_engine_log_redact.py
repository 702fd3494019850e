"""The node agent redacts an engine log line before it cuts it: a secret straddling
`ENGINE_LINE_MAX` never keeps a prefix in the frame or in the lines kept (issue 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mvp_tui.datastream.frame_line import parse_frame_line
from mvp_tui.node.engine import Engine, EngineSpec
from mvp_tui.node.frames import ENGINE_LINE_MAX, Emitter, clean_text
from mvp_tui.secrets import Redactor

SECRET = "hf_4f9c2e7b1a0d5e6f8a7b6c5d4e3f"


def test_clean_text_redacts_before_it_cuts() -> None:
    text = "\x1b[2J" + "x" * 88 + SECRET + " more"
    shown = clean_text(text, 100, redact=Redactor([SECRET]))
    assert SECRET[:8] not in shown and shown.startswith("x" * 88 + "<redacted>")


def test_engine_log_lines_are_redacted_then_cut(tmp_path: Path) -> None:
    line = "x" * (ENGINE_LINE_MAX - 12) + SECRET + " more"
    out = tmp_path / "frames"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    try:
        emitter = Emitter(fd, Redactor([SECRET]), "r-7", 3)
        spec = EngineSpec("fake", [sys.executable], "/health", 1)
        engine = Engine(spec, emitter, control=None)  # type: ignore[arg-type]
        engine.proc = subprocess.Popen(
            [sys.executable, "-c", f"print({line!r})"], stdout=subprocess.PIPE
        )
        engine._forward_log()  # to the end of the engine's output
        engine.proc.wait(timeout=10)
    finally:
        os.close(fd)
    (frame,) = [parse_frame_line(text) for text in out.read_text().splitlines()]
    assert frame.channel == "mvp.node.3.engine"
    for shown in (frame.payload.decode(), *engine.last_lines):
        assert SECRET[:8] not in shown and "<redacted>" in shown, shown[-60:]
