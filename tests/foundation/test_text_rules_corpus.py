"""The rules for untrusted text (strip escapes and controls, redact, then cut) and for secret
values, on one corpus: one implementation (mvp_tui/untrusted.py, mvp_tui/secrets.py), which the
node agent imports and ships in its zipapp, so the agent's log lines follow them too."""

from __future__ import annotations

import pytest

from mvp_tui.node.frames import clean_text
from mvp_tui.secrets import Redactor, is_secret_name
from mvp_tui.untrusted import clean_line

SECRET = "hf_testsecretvalue0123456789"
SHORT = "abc12"  # below both sides' length floor: never treated as a secret

CORPUS = [
    "plain text",
    "tab\tkept, newline\nand CR\r gone",
    "\x1b[31mred\x1b[0m and \x1b[2J\x1b[H cleared",
    "\x9b31m C1 CSI \x9d0;title\x9c after C1 OSC",
    "\x1b]0;window title\x07 then \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
    "\x1bP DCS payload \x1b\\ after DCS",
    "lone ESC at the end \x1b",
    "NUL\x00 BEL\x07 DEL\x7f and C1\x85\x90",
    "unterminated OSC \x1b]0;no end",
    f"token {SECRET} in the middle",
    f"\x1b[1m{SECRET[:10]}\x1b[0m{SECRET[10:]} split by an escape",
    f"{SHORT} is too short to hide",
    "ünïcödé ✓ and emoji 🙂 kept",
    "x" * 5000,
    "y" * 90 + SECRET,  # the secret straddles the cut: redacted before it
    "bidi \u202eoverride\u202c, \u2066isolate\u2069, mark\u200f\u061c",
    f"zero-width {SECRET[:9]}\u200b{SECRET[9:]} \ufeff\u2060 inside a secret",
]


@pytest.mark.parametrize("text", CORPUS)
@pytest.mark.parametrize("max_chars", [100, 4096])
def test_text_is_cleaned_then_redacted_then_cut(text: str, max_chars: int) -> None:
    shown = clean_line(text, max_chars, redact=Redactor([SECRET, SHORT]))
    assert SECRET not in shown and SECRET[:12] not in shown
    assert not any(c in shown for c in "\x1b\x00\x07\x7f\x9b\u202e\u200b\ufeff\n\r")
    assert len(shown) <= max_chars + len(" … [cut 99999 chars]")
    assert clean_text(text, max_chars, redact=Redactor([SECRET, SHORT])) == shown
    if SHORT in text:
        assert SHORT in shown  # below the length floor: never treated as a secret


@pytest.mark.parametrize("name", ["HF_TOKEN", "VASTAI_API_KEY", "db_password", "MY_SECRET"])
def test_secret_names_are_recognised(name: str) -> None:
    assert is_secret_name(name)
    assert not is_secret_name("MVP_MODEL_ID")
