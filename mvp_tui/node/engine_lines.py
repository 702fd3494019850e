"""Which of the engine's log lines may leave the node: at `-lv 4` (the multi-node main, for
its per-device load lines) llama-server logs every request body, every response body and
every streamed chunk, so prompts and answers would reach the engine channel, the agent's log
files and the frame archive. Those lines are dropped here, before anything frames them."""

from __future__ import annotations

import re

# llama-server's debug lines with a body (server-http.cpp `log_server_request`: `request:  `
# with two spaces, `response: `; and `http: streamed chunk`); its info line `request: GET
# /health 127.0.0.1 200` (one space) names no body and stays.
_BODY_LINE = re.compile(r"\b(?:request:  |response: |http: streamed chunk)")


class PrivateLines:
    """Drops body lines, and the rest of a body a line break split (an unbalanced `{`)."""

    def __init__(self) -> None:
        self._depth = 0  # open braces of a body still being printed
        self.dropped = 0

    def keep(self, line: str) -> bool:
        if self._depth > 0:
            self._depth = max(0, self._depth + _balance(line))
            self.dropped += 1
            return False
        match = _BODY_LINE.search(line)
        if match is None:
            return True
        self._depth = max(0, _balance(line[match.end():]))
        self.dropped += 1
        return False


def _balance(text: str) -> int:
    """Open minus closed braces outside JSON strings (good enough to find a body's end)."""
    depth, quoted, escaped = 0, False, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = quoted
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch in "{[":
            depth += 1
        elif not quoted and ch in "}]":
            depth -= 1
    return depth
