"""SSH session texts from the node or a library (stderr of the node-side reader, error
strings) are redacted before they are cut to one line (issue 8)."""

from __future__ import annotations

from typing import Any, cast

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import MemoryPins, NodeSession, SshSettings
from mvp_tui.ssh.logtail import LineAssembler

SECRET = "hf_4f9c2e7b1a0d5e6f8a7b6c5d4e3f"


def test_session_lines_are_redacted_then_cut() -> None:
    lines: list[str] = []
    session = NodeSession(
        SshEndpoint(host="127.0.0.1", port=22, user="root", via="direct"),
        cast(Any, None),  # no connection is made
        MemoryPins(),
        "vastai:7002",
        SshSettings(),
        lambda event: None,
        lambda kind, line: None,
        lines.append,
        redactor=Redactor([SECRET]),
    )
    verdict = "\x1b[31m" + "x" * 228 + SECRET + "\x07 more"  # the secret straddles 240
    session._line("\x1b[31m" + "x" * 588 + SECRET + "\x07 more")  # and 600
    for shown in (session._one_line(verdict), lines[-1]):  # a verdict line; a provider line
        assert SECRET[:8] not in shown and "<redacted" in shown, shown
        assert "\x1b" not in shown and "\x07" not in shown


def _pieces(redactor: Redactor | None, line: bytes, chunk: int = 4096) -> list[bytes]:
    pieces: list[bytes] = []
    assembler = LineAssembler("stdout", 0, 65536, redactor)
    for start in range(0, len(line), chunk):
        assembler.feed(line[start : start + chunk], lambda _kind, piece: pieces.append(piece))
    assert assembler.position == len(line)  # the resume position: the whole line read
    return pieces


def test_a_long_line_is_never_cut_through_a_secret() -> None:
    redactor = Redactor([SECRET])
    for before in (1, 10, len(SECRET) - 1):  # the secret starts this far ahead of 64 KiB
        line = b"x" * (65536 - before) + SECRET.encode() + b"y" * 70000 + b"\n"
        pieces = _pieces(redactor, line)
        assert b"".join(pieces) == line[:-1]  # every byte delivered once, in order
        assert all(len(piece) <= 65536 for piece in pieces)
        shown = [redactor(piece.decode()) for piece in pieces]  # as the bridge does per line
        assert not any(SECRET[:6] in text or SECRET[-6:] in text for text in shown), before
        assert sum("<redacted>" in text for text in shown) == 1
    # Without a secret to keep whole, pieces are exactly the limit, as before.
    plain = b"z" * 140000 + b"\n"
    assert [len(p) for p in _pieces(None, plain)] == [65536, 65536, 140000 - 131072]
