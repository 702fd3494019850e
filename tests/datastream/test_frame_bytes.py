"""The msgspec fast path reads every line exactly as the standard-library parser does."""

from __future__ import annotations

import pytest

from mvp_tui.datastream.frame_line import (
    FrameLine,
    encode_frame_line,
    parse_frame_bytes,
    parse_frame_line,
)

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
    b"not json at all",
]


def outcome(parse: object, line: object) -> FrameLine | str:
    try:
        channel, payload = parse(line)  # type: ignore[operator]
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
