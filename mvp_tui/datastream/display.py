"""Frames as text a widget can show: sanitised, one line, never markup.

The widget builds `rich.text.Text(display_text(frame))`; it must never parse the result
as Rich markup, so "[bold]x[/]" from a node stays those literal characters.
"""

from __future__ import annotations

import json

from mvp_tui.datastream.channels import is_node_log_channel
from mvp_tui.datastream.frame import Frame
from mvp_tui.untrusted import DEFAULT_MAX_CHARS, clean_line


def display_text(frame: Frame, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The frame's payload for the screen.

    A provisioning log frame shows its line; any other frame its payload text. Escape and
    control sequences are stripped, invalid UTF-8 shows as U+FFFD, and text beyond
    `max_chars` is cut with a marker.
    """
    text = frame.payload.decode("utf-8", "replace")
    if is_node_log_channel(frame.channel):
        text = _log_line(text)
    return clean_line(text, max_chars)


def _log_line(text: str) -> str:
    """The `line` of a `{"line": {..., "line": "..."}}` record, or the text unchanged."""
    try:
        record = json.loads(text)
    except ValueError:
        return text
    if isinstance(record, dict):
        inner = record.get("line")
        if isinstance(inner, dict) and isinstance(inner.get("line"), str):
            return str(inner["line"])
    return text
