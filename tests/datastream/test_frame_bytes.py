"""The msgspec fast path reads every line exactly as the standard-library parser does."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.datastream.archive import FrameArchive, read_frames
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.frame_line import (
    FrameLine,
    encode_frame_line,
    parse_frame_bytes,
    parse_frame_line,
)
from mvp_tui.datastream.hub import ChannelHub

CORPUS: list[bytes] = [
    encode_frame_line("mvp.node.1.engine", "llama_model_loader: - kv 3: arch = llama").encode(),
    encode_frame_line("mvp.node.1.engine", 'café ✓ \t tabs "quotes" \\ back').encode(),
    encode_frame_line("mvp.node.1.agent", {"type": "NodeAgentProgress", "bytes": 4096}).encode(),
    encode_frame_line("mvp.node.1.agent", {"text": "é", "list": [1, 2.5, None, True]}).encode(),
    encode_frame_line("c", {"with space": "a b"}).encode(),
    encode_frame_line("c", 12).encode(),
    encode_frame_line("c", None).encode(),
    encode_frame_line("c", [1, "x"]).encode(),
    encode_frame_line("c", "").encode(),
    b'{"mvp_frame":1,"channel":"c","payload":"\\ud800 lone surrogate"}',
    b'{"mvp_frame":1,"channel":"c","payload":NaN}',
    b'{"mvp_frame":1,"channel":"c","payload":{"big":1e400}}',
    b'{"mvp_frame":1,"channel":"c","payload":{"a": 1}}',  # spaced
    b'{"mvp_frame": 1, "channel": "c", "payload": "spaced"}',
    b'{"channel":"c","mvp_frame":1,"payload":{"k":"\\u00e9"}}',  # other key order
    b'{"mvp_frame":1,"channel":"c","payload":{"k":"\\u00e9"}}',
    b'{"mvp_frame":1,"channel":"c","payload":"x","extra":{"k":"\\u00e9"}}',
    b'{"mvp_frame":1,"channel":"c","payload":{"k":"\\u00e9"},"extra":1}',
    b'{"mvp_frame":1,"channel":"c","extra":1,"payload":{"k":"\\u00e9"}}',
    b'{"mvp_frame":1,"channel":"c","payload":1,"payload":"twice"}',
    b'{"mvp_frame":1,"channel":"c\\u0041","payload":"escaped channel"}',
    b'{"mvp_frame":1,"channel":"c\\u0041","payload":{"x":1}}',
    b'{"mvp_frame":1,"channel":"c","payload":"x"} ',
    b'{"mvp_frame":2,"channel":"c","payload":"x"}',
    b'{"mvp_frame":true,"channel":"c","payload":"x"}',
    b'{"mvp_frame":1.0,"channel":"c","payload":"x"}',
    b'{"mvp_frame":1,"channel":3,"payload":"x"}',
    b'{"mvp_frame":1,"channel":"c"}',
    b'{"mvp_frame":1,"channel":"c","payload":"x"',
    b'["mvp_frame",1]',
    b'{"mvp_frame":1,"channel":"c","payload":"\xff"}',
    b'{"mvp_frame":1,"channel":"c","payload":"raw\ttab"}',  # a control character unescaped
    b'{"mvp_frame":1,"channel":"c","payload":"raw\x01"}',
    b'{"mvp_frame":1,"channel":"c","payload":"bad \\x escape"}',
    b"not json at all",
]


def outcome(parse: object, line: object) -> FrameLine | str:
    try:
        channel, payload, *_ = parse(line)  # type: ignore[operator]
    except ValueError as error:
        return f"{type(error).__name__}: {error}"
    return FrameLine(channel, payload)


@pytest.mark.parametrize("raw", CORPUS)
def test_bytes_path_matches_the_standard_library_parser(raw: bytes) -> None:
    try:
        text = raw.decode()
    except UnicodeDecodeError as error:
        want: FrameLine | str = f"UnicodeDecodeError: {error}"
    else:
        want = outcome(parse_frame_line, text)
    assert outcome(parse_frame_bytes, raw) == want


def test_the_corpus_covers_both_outcomes() -> None:
    kinds = {type(outcome(parse_frame_bytes, raw)) for raw in CORPUS}
    assert kinds == {FrameLine, str}


def test_archived_string_payloads_read_back_as_the_frames_published(tmp_path: Path) -> None:
    """The archive writes a frame line's own JSON string as the record's value when it can:
    every record must still read back as exactly the frame the hub published."""
    path = tmp_path / "frames.jsonl"
    published: list[Frame] = []
    with FrameArchive(path) as archive:
        hub = ChannelHub(archive=archive)
        hub.listeners.append(published.append)
        bridge = NodeBridge(hub, 1, StreamId("1", 7))
        for raw in CORPUS:
            bridge.feed_line("stdout", raw)
    taken_as_is = [raw for raw in CORPUS if parse_or_none(raw) is not None]
    assert len(taken_as_is) >= 5  # the corpus does exercise the written-as-is value
    assert list(read_frames(path)) == published
    assert len(published) == len(CORPUS)


def parse_or_none(raw: bytes) -> str | None:
    try:
        return parse_frame_bytes(raw)[2]
    except ValueError:
        return None
