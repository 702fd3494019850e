"""The agent's output: frames on stdout, one whole line at a time, secrets removed.

The text rules (escapes and controls out, secrets redacted, then cut), the redactor and the
frame line's wire form are the app's own modules (`mvp_tui.untrusted`, `mvp_tui.secrets`,
`mvp_tui.node_protocol`), which travel in the agent's zipapp with it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from mvp_tui.node_protocol import (
    ENGINE_OFFLOAD,
    NODE_AGENT_NOTICE,
    NODE_AGENT_PHASE,
    NODE_AGENT_PROGRESS,
    WEIGHTS_CHANNEL,
    agent_channel,
    engine_channel,
    frame_line,
)
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import Redact, clean_line

ENGINE_LINE_MAX = 2000  # an engine log line is cut at this many characters


def clean_text(text: str, max_chars: int = ENGINE_LINE_MAX, *, redact: Redact | None = None) -> str:
    """Untrusted text made safe to forward (`mvp_tui.untrusted.clean_line`), bounded to an
    engine log line by default."""
    return clean_line(text, max_chars, redact=redact)


class Emitter:
    """Writes frames to stdout, one whole line at a time from any thread, secrets removed."""

    def __init__(self, out_fd: int, redactor: Redactor, run_id: str, node_id: int) -> None:
        self._out_fd = out_fd
        self._redact = redactor
        self._lock = threading.Lock()
        self._broken = False
        self.run_id = run_id
        self.node_id = node_id

    @property
    def agent_channel(self) -> str:
        return agent_channel(self.node_id)

    @property
    def engine_channel(self) -> str:
        return engine_channel(self.node_id)

    def frame(self, channel: str, payload: Any) -> None:
        line = self._redact(frame_line(channel, self._redact.value(payload))) + "\n"
        data = line.encode("utf-8", "replace")
        with self._lock:
            if self._broken:
                return
            try:
                # Raw writes, no Python buffer: a daemon thread can never hold a buffer
                # lock at interpreter exit (which aborts the process).
                while data:
                    data = data[os.write(self._out_fd, data) :]
            except OSError:
                # Nobody reads any more (the dashboard went away): keep serving, stop writing.
                self._broken = True

    def _record(self, kind: str, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"type": kind, "run_id": self.run_id, "node_id": self.node_id}
        record.update(fields)
        record["at"] = round(time.time(), 3)
        return record

    def phase(
        self, phase: str, status: str, detail: dict[str, Any], elapsed_ms: int | None = None
    ) -> None:
        record = self._record(NODE_AGENT_PHASE, phase=phase, status=status, detail=detail)
        if elapsed_ms is not None:
            record["elapsed_ms"] = elapsed_ms
        self.frame(self.agent_channel, record)

    def progress(self, phase: str, **fields: Any) -> None:
        self.frame(self.agent_channel, self._record(NODE_AGENT_PROGRESS, phase=phase, **fields))

    def notice(self, message: str) -> None:
        self.frame(self.agent_channel, self._record(NODE_AGENT_NOTICE, message=message))

    def offload(self, **fields: Any) -> None:
        """What the engine's load log says it put on the GPUs (`EngineOffload`)."""
        self.frame(self.agent_channel, self._record(ENGINE_OFFLOAD, **fields))

    def weights(self, kind: str, **fields: Any) -> None:
        self.frame(WEIGHTS_CHANNEL, self._record(kind, **fields))

    def engine_line(self, text: str) -> None:
        self.frame(self.engine_channel, text)

    def redact(self, text: str) -> str:
        """`text` with the node's secrets replaced (for text cut before it is emitted)."""
        return self._redact(text)

    def stderr(self, text: str) -> None:
        """A diagnostic for humans reading the node's stderr log (never a frame)."""
        try:
            sys.stderr.write(self._redact(text) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


