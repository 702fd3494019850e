"""Node stdio into frames: frame lines onto their channels, every other line onto a log channel.

A node's stdout carries the agent's frame lines (see `frame_line`) among ordinary output;
its stderr and the provider's own lines are logs only. Lines come from an untrusted node:
invalid UTF-8 is kept as bytes, overlong lines are cut with a marker, a line that looks like
a frame but is not a valid one (bad JSON, bad or engine-only channel name, too many
channels) becomes a plain stdout log line. Nothing here raises on node input.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring

from mvp_tui.datastream.channels import (
    ChannelNameError,
    LogStream,
    log_stream,
    node_log_channel,
    validate_node_channel,
)
from mvp_tui.datastream.frame import Frame, StreamId, node_stream
from mvp_tui.datastream.frame_line import parse_frame_bytes
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.node_protocol import NODE_CHANNEL_PREFIX
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import one_line_ascii

DEFAULT_MAX_LINE_BYTES = 64 * 1024
LOG_SOURCE = "orchestrator"
FRAME_SOURCE = "node_bootstrap_stdio"
CUT_MARKER = " … [cut {n} bytes]"

_encode_str: Callable[[str], str] = encode_basestring
_FRAME_PREFIX = b'{"mvp_frame":'


def looks_like_frame(raw: bytes) -> bool:
    """Could this stdout line be meant as a frame line (`looks_like_frame_line` on bytes)?"""
    return raw.startswith(b"{") and b'"mvp_frame"' in raw


_STDOUT = LogStream.STDOUT


class NodeBridge:
    """Turns one node's stdout/stderr/provider lines into frames on the hub.

    `source` names log frames in the archive (the seed's "orchestrator"); frames the node
    sent itself are archived with `frame_source` (the seed's "node_bootstrap_stdio").
    `run_id` defaults to the stream's lifetime, as the seed's node streams are `<node>#<run>`.
    """

    def __init__(
        self,
        hub: ChannelHub,
        node_id: int,
        stream_id: StreamId | None = None,
        source: str = LOG_SOURCE,
        *,
        run_id: int | None = None,
        frame_source: str = FRAME_SOURCE,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        redactor: Redactor | None = None,
        own_channels_only: bool = False,
    ) -> None:
        if max_line_bytes < 16:
            raise ValueError(f"max_line_bytes={max_line_bytes}: must be at least 16")
        self.hub = hub
        self.node_id = int(node_id)
        self.run_id = int(
            run_id if run_id is not None else (stream_id.lifetime if stream_id else 0)
        )
        self.stream = stream_id or node_stream(self.run_id, self.node_id)
        self.source = source
        self.frame_source = frame_source
        self.max_line_bytes = max_line_bytes
        self.rejected = 0
        self.last_rejection: str | None = None
        self._redactor = redactor
        # A node with a pipe of its own (a rented worker's session) speaks for itself only:
        # another node's `mvp.node.<M>.` channels are refused, as a worker could otherwise
        # show the main node's phases as its own.
        self._own_prefix = f"{NODE_CHANNEL_PREFIX}{self.node_id}." if own_channels_only else None
        self._channels = {kind: node_log_channel(self.node_id, kind) for kind in LogStream}
        self._record_heads = {
            kind: f'{{"line":{{"run_id":{self.run_id},"node_id":{self.node_id},'
            f'"stream":"{kind.value}","line":'
            for kind in LogStream
        }
        self._node_channels: set[str] = set()
        self._kinds: dict[LogStream | str, LogStream] = {k: k for k in LogStream}
        self._kinds.update({k.value.lower(): k for k in LogStream})

    def feed_line(self, kind: LogStream | str, raw: bytes) -> Frame:
        """One line from the node's stdout or stderr (trailing newline optional)."""
        stream = self._kinds.get(kind) or log_stream(str(kind))
        raw = raw.rstrip(b"\r\n")
        if len(raw) > self.max_line_bytes:
            raw = self._cut(raw)
        # The agent's own form first: its prefix is cheaper to test than a search.
        if stream is _STDOUT and (raw.startswith(_FRAME_PREFIX) or looks_like_frame(raw)):
            frame = self._try_frame(raw)
            if frame is not None:
                return frame
        return self._log(stream, raw)

    def on_line(self, kind: str, raw: bytes) -> None:
        """`feed_line` shaped as a line handler: `LocalProvider(on_line=bridge.on_line)`."""
        self.feed_line(kind, raw)

    def feed_provider_line(self, text: str) -> Frame:
        """A line about the node from the provider side (SSH attempts, API answers)."""
        raw = text.encode("utf-8", "replace")
        if len(raw) > self.max_line_bytes:
            raw = self._cut(raw)
        return self._log(LogStream.PROVIDER, raw)

    def _try_frame(self, raw: bytes) -> Frame | None:
        """The frame a stdout line carries, or None (counted) when it is not a valid one."""
        try:
            redactor = self._redactor
            if redactor is not None and redactor.found_in(raw):
                raw = redactor(raw.decode()).encode()
            channel, payload, archive_value = parse_frame_bytes(raw)
            if channel not in self._node_channels:
                self._admit(channel)
        except ValueError as error:  # not UTF-8, FrameLineError, ChannelNameError
            self.rejected += 1
            self.last_rejection = one_line_ascii(str(error))
            return None
        return self.hub.append(channel, payload, self.stream, self.frame_source, archive_value)

    def _admit(self, channel: str) -> None:
        """Accept a node's channel name once, or raise ChannelNameError."""
        validate_node_channel(channel)
        own = self._own_prefix
        if (
            own is not None
            and channel.startswith(NODE_CHANNEL_PREFIX)
            and not channel.startswith(own)
        ):
            raise ChannelNameError(f"channel {channel!r} belongs to another node than {own}*")
        if not self.hub.can_open(channel):
            raise ChannelNameError(
                f"channel {channel!r} would exceed the hub's {self.hub.max_channels} channels"
            )
        self._node_channels.add(channel)

    def _log(self, stream: LogStream, raw: bytes) -> Frame:
        text = raw.decode("utf-8", "surrogateescape")
        redactor = self._redactor
        if redactor is not None and redactor.found_in(raw):
            text = redactor(text)
        record = self._record_heads[stream] + _encode_str(text) + "}}"
        return self.hub.append(
            self._channels[stream],
            record.encode("utf-8", "surrogateescape"),
            self.stream,
            self.source,
        )

    def _cut(self, raw: bytes) -> bytes:
        """The first `max_line_bytes` of `raw` (on a UTF-8 boundary) and a cut marker.

        Secrets are redacted first: a secret straddling the limit must not keep its prefix.
        """
        if self._redactor is not None and self._redactor.found_in(raw):
            text = self._redactor(raw.decode("utf-8", "surrogateescape"))
            raw = text.encode("utf-8", "surrogateescape")
            if len(raw) <= self.max_line_bytes:
                return raw
        end = self.max_line_bytes
        while end > 0 and end > self.max_line_bytes - 3 and (raw[end] & 0xC0) == 0x80:
            end -= 1
        return raw[:end] + CUT_MARKER.format(n=len(raw) - end).encode()
