"""One node container's attach stream: its stdout/stderr lines into `on_line`, our lines
down its stdin (the seed's `node_bootstrap_stdio` over the Engine API instead of a pipe).

The stream is the raw socket of `POST /containers/{id}/attach` (stdin, stdout, stderr,
multiplexed in 8-byte-headed frames since the container has no TTY). A reader thread splits
it into lines and hands them to the event loop; the end of the stream means the container's
process has ended. The container was created with StdinOnce, so when this socket closes —
we stop it, or our process dies, even by SIGKILL — the agent's stdin reaches EOF and it shuts
down (MVP_STDIN_EOF_SHUTDOWN).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from docker.utils.socket import frames_iter  # type: ignore[import-untyped]

from mvp_tui.node_protocol import WEIGHTS_CHANNEL, WORKER_FATAL
from mvp_tui.providers.local.node import CUT_MARKER, MAX_LINE_BYTES, LineHandler

# A frame line holds these JSON strings when it carries the agent's own WorkerFatal.
_WEIGHTS_MARK = f'"{WEIGHTS_CHANNEL}"'.encode()
_FATAL_MARK = f'"{WORKER_FATAL}"'.encode()

log = logging.getLogger(__name__)

LAST_LINES = 20
_KINDS = {1: "stdout", 2: "stderr"}


class AttachedNode:
    """The attach socket of one container and the thread that reads it."""

    def __init__(self, sock: Any, provider_id: str, on_line: LineHandler | None) -> None:
        self.rewrite: Callable[[bytes], bytes] | None = None  # applied to stdout lines
        self._sock = sock
        self._raw: socket.socket | None = getattr(sock, "_sock", None)
        self.provider_id = provider_id
        self._on_line = on_line
        self._loop = asyncio.get_running_loop()
        self.ended = asyncio.Event()  # the output stream ended: the process in it has exited
        self.last_lines: collections.deque[str] = collections.deque(maxlen=LAST_LINES)
        self.saw_fatal = False  # the agent reported WorkerFatal itself
        self.saw_exit = False  # the agent reported its own exit (agent_exit phase)
        self._pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        # Per stream: the rest of a line already delivered cut is being skipped up to its
        # newline (as the local node does): that rest delivered as a line of its own would
        # begin with the tail of whatever the cut went through, a secret's too.
        self._dropping: dict[str, bool] = {"stdout": False, "stderr": False}
        self._thread = threading.Thread(
            target=self._read, name=f"docker-attach-{provider_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    # -- reading (thread)

    def _read(self) -> None:
        try:
            for stream, data in frames_iter(self._sock, tty=False):
                kind = _KINDS.get(stream)
                if kind is None or not data:
                    continue
                self._split(kind, data)
        except (OSError, ValueError) as exc:  # closed under us: the end, like EOF
            log.debug("attach stream of %s ended: %r", self.provider_id, exc)
        for kind, pending in self._pending.items():
            if pending and not self._dropping[kind]:
                self._hand(kind, bytes(pending))
                pending.clear()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(self.ended.set)

    def _split(self, kind: str, data: bytes) -> None:
        pending = self._pending[kind]
        pending += data
        while (end := pending.find(b"\n")) != -1:
            if not self._dropping[kind]:
                self._hand(kind, bytes(pending[:end]))
            self._dropping[kind] = False
            del pending[: end + 1]
        if self._dropping[kind]:
            pending.clear()
        elif len(pending) > MAX_LINE_BYTES:
            self._hand(kind, bytes(pending[:MAX_LINE_BYTES]) + CUT_MARKER)
            pending.clear()
            self._dropping[kind] = True

    def _hand(self, kind: str, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._deliver, kind, line)

    # -- delivering (event loop)

    def _deliver(self, kind: str, line: bytes) -> None:
        if kind == "stdout" and self.rewrite is not None:
            line = self.rewrite(line)
        if kind == "stdout" and _WEIGHTS_MARK in line and _FATAL_MARK in line:
            self.saw_fatal = True
        if kind == "stdout" and b'"agent_exit"' in line:
            self.saw_exit = True
        self.last_lines.append(line[:300].decode("utf-8", "replace"))
        if self._on_line is None:
            return
        try:
            self._on_line(kind, line)
        except Exception:
            log.exception("on_line handler failed for a %s line of %s", kind, self.provider_id)

    def provider_line(self, text: str) -> None:
        """One of our own lines about this node, on its provider log channel."""
        if self._on_line is not None:
            try:
                self._on_line("provider", text.encode("utf-8", "replace"))
            except Exception:
                log.exception("on_line handler failed for a provider line")

    # -- writing, closing

    def send(self, line: str) -> bool:
        """One line down the container's stdin; False when the stream is gone."""
        return self.send_bytes(line.encode() + b"\n")

    def send_bytes(self, data: bytes) -> bool:
        """Bytes down the container's stdin (blocking); False when the stream is gone."""
        if self._raw is None:
            return False
        try:
            self._raw.sendall(data)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Ends the attach: the container's stdin closes (StdinOnce), the reader stops."""
        if self._raw is not None:
            with contextlib.suppress(OSError):
                self._raw.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
