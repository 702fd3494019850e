"""The node agent's frame lines: how a node puts a frame on its stdout.

Format (written by `mvp_tui.node_protocol.frame_line`, which the node agent uses too, as
that module is standard-library-only): one JSON object per line,

    {"mvp_frame":1,"channel":"<name>","payload":<any JSON value>}

written compact and ASCII-only (`json.dumps(..., separators=(",", ":"), ensure_ascii=True)`),
keys in that order. The frame's payload bytes on the channel are the UTF-8 of the payload
when it is a JSON string, else the payload's compact JSON. A channel name is dot-separated
segments of `[A-Za-z0-9_-]` (≤128 chars) outside the engine's `mvp.orch.` and
`mvp.provisioning.` prefixes. Any other line is a log line; a line that looks like a frame
but is malformed is treated as a log line too, never as an error of the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

import msgspec

from mvp_tui.datastream.channels import validate_channel
from mvp_tui.node_protocol import frame_line

FRAME_LINE_VERSION = 1
FRAME_KEY = "mvp_frame"
_PREFIX = '{"mvp_frame":1,"channel":"'
_PAYLOAD_KEY = ',"payload":'
_PREFIX_LEN = len(_PREFIX)
_PAYLOAD_KEY_LEN = len(_PAYLOAD_KEY)
_new_tuple = tuple.__new__

_scan_string: Callable[[str, int], tuple[str, int]] = scanstring
_scan_value: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_PREFIX_BYTES = _PREFIX.encode()
_PAYLOAD_KEY_BYTES = _PAYLOAD_KEY.encode()


class _FrameObject(msgspec.Struct):
    """A frame line as msgspec decodes it (any key order, extra keys ignored); the payload
    is left as its JSON text, decoded below only when it is a string."""

    mvp_frame: int
    channel: str
    payload: msgspec.Raw


_decode_frame = msgspec.json.Decoder(_FrameObject).decode
_decode_str = msgspec.json.Decoder(str).decode
_DecodeError = (msgspec.MsgspecError, ValueError)


class FrameLineError(ValueError):
    """A line that announces itself as a frame (`"mvp_frame"`) but is not a valid one."""


class FrameLine(NamedTuple):
    """A parsed frame line: the channel as written (not yet validated) and payload bytes."""

    channel: str
    payload: bytes


def encode_frame_line(channel: str, payload: Any) -> str:
    """One frame line (no newline) for `payload` on `channel`."""
    validate_channel(channel)
    return frame_line(channel, payload)


def looks_like_frame_line(line: str) -> bool:
    """Cheap test: could this line be meant as a frame line?"""
    return line[:1] == "{" and '"mvp_frame"' in line


def parse_frame_line(line: str) -> FrameLine:
    """The frame a line carries; FrameLineError when it is not a well-formed frame line.

    Lines in the agent's canonical form take a fast path (the payload is scanned once and
    never re-encoded); other valid JSON frame objects (spaces, key order, extra keys) are
    accepted too.
    """
    if line.startswith(_PREFIX):
        try:
            channel, at = _scan_string(line, _PREFIX_LEN)
            if line.startswith(_PAYLOAD_KEY, at):
                start = at + _PAYLOAD_KEY_LEN
                if line.startswith('"', start):
                    text, end = _scan_string(line, start + 1)
                    payload = text.encode("utf-8", "surrogatepass")
                else:
                    value, end = _scan_value(line, start)
                    raw = line[start:end]
                    if " " in raw or "\n" in raw or "\t" in raw or "\r" in raw:
                        payload = _compact(value)
                    else:
                        payload = raw.encode("utf-8", "surrogatepass")
                if end == len(line) - 1 and line.endswith("}"):
                    # What FrameLine(channel, payload) does, minus a Python-level call.
                    return _new_tuple(FrameLine, (channel, payload))
        except (ValueError, StopIteration):
            pass
    return _parse_general(line)


def parse_frame_bytes(raw: bytes) -> tuple[str, bytes, str | None]:
    """`parse_frame_line` of the line's UTF-8 bytes, same results, same errors (a line that
    is not UTF-8 raises UnicodeDecodeError, a ValueError too), as (channel, payload, JSON):
    the third is the payload's text as a JSON string, when the line ends with it (the
    agent's form for text), for the frame archive to write as is; else None.

    The ingest hot path: msgspec decodes the line in one C call. A string payload (the
    engine's log, the bulk of a run) is taken as decoded; a structured payload keeps its JSON
    text as sent when the line is in the agent's compact canonical form. Anything msgspec
    reads differently from the standard library (NaN, huge numbers, lone surrogates, spacing,
    other key orders) goes through `parse_frame_line`, which defines the format.
    """
    try:
        frame = _decode_frame(raw)
    except _DecodeError:
        return (*parse_frame_line(raw.decode()), None)
    if frame.mvp_frame == FRAME_LINE_VERSION:
        payload = frame.payload
        if raw.endswith(b'"}'):  # a string payload, last (the agent's form): the engine's log
            end = len(raw) - 1
            start = end - len(payload)
            # Ends with `,"payload":<that string>}`: the string is the payload's own JSON
            # text (a JSON string holds no unescaped quote to fake that key).
            if raw.startswith(_PAYLOAD_KEY_BYTES, start - _PAYLOAD_KEY_LEN):
                quoted = raw[start:end]
                try:
                    if 92 not in quoted:  # no backslash: the UTF-8 inside the quotes is the text
                        return frame.channel, quoted[1:-1], quoted.decode()
                    return frame.channel, _decode_str(payload).encode(), quoted.decode()
                except _DecodeError:  # not UTF-8 (msgspec leaves a raw payload unchecked)
                    pass
        elif raw.startswith(_PREFIX_BYTES):  # an agent record, maybe in the agent's form
            body = memoryview(payload).tobytes()
            channel = frame.channel.encode()
            if (
                raw == b"".join((_PREFIX_BYTES, channel, b'"', _PAYLOAD_KEY_BYTES, body, b"}"))
                and 32 not in body  # ints: a byte test is a memchr, a 1-byte bytes test is not
                and 10 not in body
                and 9 not in body
                and 13 not in body
            ):
                return frame.channel, body, None
    return (*parse_frame_line(raw.decode()), None)


def _parse_general(line: str) -> FrameLine:
    try:
        data = json.loads(line)
    except ValueError as error:
        raise FrameLineError(f"frame line is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise FrameLineError("frame line is not a JSON object")
    version = data.get(FRAME_KEY)
    if type(version) is not int or version != FRAME_LINE_VERSION:
        raise FrameLineError(f"frame line has mvp_frame={version!r}, expected 1")
    channel = data.get("channel")
    if not isinstance(channel, str):
        raise FrameLineError(f"frame line channel is {channel!r}, not a string")
    if "payload" not in data:
        raise FrameLineError("frame line has no payload")
    value = data["payload"]
    if isinstance(value, str):
        return FrameLine(channel, value.encode("utf-8", "surrogatepass"))
    return FrameLine(channel, _compact(value))


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
