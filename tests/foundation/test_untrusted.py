"""The one untrusted-text helper: escapes and controls out, secrets redacted, then cut."""

from __future__ import annotations

import pytest

from mvp_tui.secrets import REDACTED, Redactor
from mvp_tui.untrusted import (
    SECRET_MARGIN_CHARS,
    clean_bytes,
    clean_line,
    clean_lines,
    one_line_ascii,
    strip_escapes,
)

SECRET = "test-secret-4f9c2e7b1a0d5e6f8a7b6c5d"
REDACT = Redactor([SECRET])


def straddling(limit: int, before: int = 12) -> str:
    """Text whose secret starts `before` characters ahead of the cut at `limit`."""
    return "x" * (limit - before) + SECRET + " and more text after it"


def assert_no_prefix(text: str) -> None:
    assert SECRET[:8] not in text, text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[2Jb\x1b[31mc\x1b[0m", "abc"),  # CSI
        ("a\x1b]52;c;Q0xJUA==\x07b", "ab"),  # OSC 52 ended by BEL
        ("a\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # OSC 8 ended by ST
        ("a\x1bP$qm\x1b\\b", "ab"),  # DCS
        ("a\x1b_G1\x1b\\b\x1b^pm\x1b\\c\x1bXsos\x1b\\d", "abcd"),  # APC, PM, SOS
        ("a\x9b31mb\x9d0;t\x9cc\x90q\x9cd", "abcd"),  # 8-bit CSI, OSC, DCS
        ("a\x07b\x08c\x00d\x7fe\x85f\r\ng\x1bh", "abcdefg"),  # controls, a lone ESC
        ("tab\tstays [bold]markup[/] stays", "tab\tstays [bold]markup[/] stays"),
        ("unterminated \x1b]52;c;QUJD", "unterminated "),
        # Bidi overrides, embeddings and isolates reorder what is shown ("exe.txt" here).
        ("file\u202etxt.exe\u202c \u2066iso\u2069 \u202aemb\u202b\u061c", "filetxt.exe iso emb"),
        # Zero-width characters and the BOM hide in text unseen.
        ("zero\u200bwidth\u200c\u200d\u200e\u200f\u2060\ufeff\u180e", "zerowidth"),
        # Every Cf by category (soft hyphen, Arabic number sign, interlinear annotation,
        # musical formatting), the tag characters, line/paragraph separators, Hangul fillers.
        ("so\u00adft \u0600n \ufff9a\ufffb \U0001d173m", "soft n a m"),
        ("ta\U000e0041\U000e0067\U000e007fgs", "tags"),
        ("li\u2028ne pa\u2029ra", "line para"),
        ("ha\u3164ng\u115f\u1160u\uffa0l", "hangul"),
        ("tab\tkept, nbsp\u00a0kept", "tab\tkept, nbsp\u00a0kept"),
    ],
)
def test_escapes_and_controls_are_removed(raw: str, shown: str) -> None:
    assert clean_line(raw) == shown == strip_escapes(raw)


def test_a_secret_cut_at_the_limit_is_redacted_whole() -> None:
    for limit in (40, 200, 300, 4096):
        text = clean_line(straddling(limit), limit, redact=REDACT)
        assert_no_prefix(text)
        assert text.startswith("x" * (limit - 12) + REDACTED[:12])
    # Escapes inside the secret do not hide it from the redactor.
    hidden = "x" * 28 + SECRET[:10] + "\x1b[0m" + SECRET[10:]
    assert_no_prefix(clean_line(hidden, 40, redact=REDACT))
    # Nor does a zero-width character inside it.
    unseen = "x" * 28 + SECRET[:10] + "\u200b" + SECRET[10:]
    assert clean_line(unseen, 400, redact=REDACT) == "x" * 28 + REDACTED


def test_one_line_ascii_redacts_before_either_cut() -> None:
    for limit in (40, 240):
        assert_no_prefix(one_line_ascii(straddling(limit), limit, redact=REDACT))
        assert_no_prefix(one_line_ascii(straddling(limit * 4), limit, redact=REDACT))


def test_clean_lines_keeps_lines_and_cuts_each_after_redaction() -> None:
    text = clean_lines(f"one\x1b[2J\r\n{straddling(50)}\nthree\x07", 50, redact=REDACT)
    one, two, three = text.split("\n")
    assert (one, three) == ("one", "three")
    assert_no_prefix(two)


def test_clean_bytes_reads_a_bounded_head_and_never_shows_a_secret_it_cut() -> None:
    body = ("y" * 1000 + SECRET + "z" * 5000).encode()
    for scan in (1000 + 12, 1000 + len(SECRET) // 2):  # the read cuts the secret
        text = clean_bytes(body, 4000, redact=REDACT, scan_bytes=scan)
        assert_no_prefix(text)
        assert "[cut " in text  # what was not read is said, not hidden
    assert len(clean_bytes(body, 4000, scan_bytes=2000)) <= 2000 - SECRET_MARGIN_CHARS + 30
    small = clean_bytes(b"ok \xff\x1b[2J", 100, scan_bytes=2000)
    assert small == "ok \ufffd"
