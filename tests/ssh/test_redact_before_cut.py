"""SSH session texts from the node or a library (stderr of the node-side reader, error
strings) are redacted before they are cut to one line (issue 8)."""

from __future__ import annotations

from typing import Any, cast

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import MemoryPins, NodeSession, SshSettings

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
