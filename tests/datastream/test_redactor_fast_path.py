"""The redactor's byte pre-check (`found_in`) and its cached order: the bridge skips decoding
a line for redaction only when no secret can be in it, and secrets still never appear."""

from __future__ import annotations

import pytest

from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.frame_line import encode_frame_line
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.secrets import REDACTED, Redactor

KEY = "vast_4f9c2e7b1a0d5e6f8a7b"
TOKEN = "hf_9a8b7c6d5e4f3a2b1c0d"
NESTED = KEY + "-suffix-9"  # contains KEY: the longer one must win, whole


def test_longest_secret_is_replaced_whole_after_later_adds() -> None:
    redact = Redactor([KEY])
    assert redact(f"x {NESTED} y") == f"x {REDACTED}-suffix-9 y"
    redact.add(NESTED)  # added after the first call: the cached order must follow
    assert redact(f"x {NESTED} y {KEY}") == f"x {REDACTED} y {REDACTED}"


@pytest.mark.parametrize(
    "raw",
    [
        b"plain line",
        f"key={KEY}".encode(),
        f"\u03bb {TOKEN} \u03bb".encode(),
        b"\xff\xfe " + KEY.encode() + b" \xc3",  # not UTF-8 around a secret
        b"\xe2" + TOKEN.encode(),  # a cut lead byte right before a secret
    ],
)
def test_found_in_is_false_only_when_redaction_changes_nothing(raw: bytes) -> None:
    redact = Redactor([KEY, TOKEN, NESTED])
    text = raw.decode("utf-8", "surrogateescape")
    if not redact.found_in(raw):
        assert redact(text) == text
    else:
        assert KEY not in redact(text) and TOKEN not in redact(text)


def test_found_in_of_an_empty_redactor_and_of_a_secret_without_bytes() -> None:
    assert not Redactor().found_in(KEY.encode())
    odd = Redactor(["\ud800-lone-surrogate"])  # no UTF-8 form: always take the text path
    assert odd.found_in(b"anything")


@pytest.mark.parametrize("kind", ["stdout", "stderr"])
def test_secrets_never_reach_frames_or_archive_values(kind: str) -> None:
    hub = ChannelHub()
    bridge = NodeBridge(hub, 2, StreamId("2", 5), redactor=Redactor([KEY, TOKEN]))
    lines = [
        (encode_frame_line("mvp.node.2.engine", f"loading with {KEY}") + "\n").encode(),
        (encode_frame_line("mvp.node.2.agent", {"token": TOKEN, "n": 1}) + "\n").encode(),
        f"stderr says {TOKEN} and {KEY}\n".encode(),
        b"nothing secret here\n",
    ]
    frames = [bridge.feed_line(kind, line) for line in lines]
    for frame in frames:
        shown = display_text(frame)
        for secret in (KEY, TOKEN):
            assert secret.encode() not in frame.payload and secret not in shown
    assert "nothing secret here" in display_text(frames[-1])
    assert sum(REDACTED in display_text(f) for f in frames) == 3
