"""Text from providers, nodes and archives is untrusted: make it safe to show and to log.

This module is the one place that does it. Terminal escape sequences (CSI, OSC, DCS, SOS, PM,
APC, their 8-bit C1 forms, two-byte escapes, a lone ESC), control characters (C0 but tab,
DEL, C1), every format character by its category (Cf: bidi overrides and isolates,
zero-width, tags), the line and paragraph separators and the blank Hangul fillers are
removed; known secrets are redacted; and only then is overlong text cut, with a visible
marker, so a secret straddling the limit never keeps a visible prefix. Invalid UTF-8 is
replaced for display.

Rich / Textual markup is never interpreted: callers render the result with
`rich.text.Text(...)` (or `Content(...)`, `markup=False`), never as a markup string. A widget
property that parses a plain `str` as markup (a border title or subtitle, a toast without
`markup=False`, a Rich `Table` cell) gets a `Text`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable  # noqa: UP035 (collections.abc's is not subscriptable on 3.8)

Redact = Callable[[str], str]
"""Replaces secrets in text (a `mvp_tui.secrets.Redactor` is one)."""

# ESC-introduced sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC (ESC ] ... BEL or ST),
# and two-byte escapes; plus the 8-bit C1 forms of CSI and OSC.
_ESCAPES = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]            # CSI
    | (?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])   # OSC, DCS, SOS, PM, APC ...
      .*?(?:\x07|\x1b\\|\x9c|$)                 # ... up to BEL or ST (or end of text)
    | \x1b[@-Z\\-_]                             # other two-byte escapes
    | \x1b.?                                    # a lone ESC (and what it would modify)
    """,
    re.VERBOSE | re.DOTALL,
)
# C0 controls except tab, DEL, C1 controls, and the invisible format characters that reorder
# or hide text (bidi embeddings, overrides and isolates, zero-width spaces and joiners, the
# BOM): they let a node's line look like something else, and one inside a secret hides it
# from the redactor.
_CONTROLS = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f\x80-\x9f"
    "\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    # Blank letters (Hangul fillers: category Lo, shown as nothing) and the tag characters.
    "\u115f\u1160\u3164\uffa0\U000e0000-\U000e007f]"
)
# And by category, for what the list above does not name: every format character (Cf: soft
# hyphen, interlinear annotations, the Arabic and Syriac marks, musical formatting…) and the
# line and paragraph separators (Zl, Zp). Looked at only when the text is not all printable.
_HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp"))

DEFAULT_MAX_CHARS = 4096
CUT_MARKER = " … [cut {n} chars]"
# Text dropped before the end of a head read from a longer input (see `clean_bytes`): a
# secret cut by that read must go whole, as no redactor can recognise half of it.
SECRET_MARGIN_CHARS = 256


def strip_escapes(text: str) -> str:
    """`text` without escape sequences and control characters (tab kept); not cut."""
    if text.isascii() and text.isprintable():
        return text  # no ESC, no control, nothing hidden: a streamed token's usual case
    text = _CONTROLS.sub("", _ESCAPES.sub("", text))
    if text.isprintable() or text.replace("\t", "").isprintable():
        return text  # the common case: no character left that could hide
    return "".join(
        ch for ch in text if ch == "\t" or unicodedata.category(ch) not in _HIDDEN_CATEGORIES
    )


def cut(text: str, max_chars: int, *, more: int = 0) -> str:
    """`text` bounded to `max_chars`, with a marker saying how much was cut.

    `more` counts characters already dropped before `text` reached here.
    """
    if len(text) <= max_chars and not more:
        return text
    kept = text[:max_chars]
    return kept + CUT_MARKER.format(n=len(text) - len(kept) + more)


def clean_line(
    text: str, max_chars: int = DEFAULT_MAX_CHARS, *, redact: Redact | None = None
) -> str:
    """One line of untrusted text, safe to print: no escapes or controls, secrets redacted
    (with `redact`), then cut to `max_chars` — in that order."""
    text = strip_escapes(text)
    if redact is not None:
        text = redact(text)
    return cut(text, max_chars)


def clean_lines(
    text: str, max_line_chars: int = DEFAULT_MAX_CHARS, *, redact: Redact | None = None
) -> str:
    """Untrusted text of several lines: each line cleaned as by `clean_line` (a CR goes with
    the other controls), newlines kept."""
    return "\n".join(clean_line(line, max_line_chars, redact=redact) for line in text.split("\n"))


def clean_bytes(
    data: bytes,
    max_chars: int = DEFAULT_MAX_CHARS,
    *,
    redact: Redact | None = None,
    scan_bytes: int | None = None,
) -> str:
    """Like `clean_line` for raw bytes: invalid UTF-8 is shown as U+FFFD.

    With `scan_bytes`, only that head of a longer `data` is read (never run the sanitiser
    over a 16 MB body); the head's last `SECRET_MARGIN_CHARS` are dropped too, so a secret
    cut by the read is not shown in part.
    """
    if scan_bytes is None or len(data) <= scan_bytes:
        return clean_line(data.decode("utf-8", "replace"), max_chars, redact=redact)
    head = data[:scan_bytes].decode("utf-8", "replace")
    kept = head[: max(0, len(head) - SECRET_MARGIN_CHARS)]
    text = strip_escapes(kept)
    if redact is not None:
        text = redact(text)
    dropped = len(data) - len(kept.encode("utf-8", "replace"))
    return cut(text, max_chars, more=max(1, dropped))


def one_line_ascii(text: str, max_chars: int = 240, *, redact: Redact | None = None) -> str:
    """A verdict line: printable ASCII only, whitespace folded, secrets redacted (with
    `redact`) before anything is cut, bounded (the seed's rule)."""
    text = clean_line(text, max_chars * 4, redact=redact)
    folded = " ".join(text.split())
    ascii_only = "".join(c if 32 <= ord(c) < 127 else "?" for c in folded)
    if len(ascii_only) > max_chars:
        ascii_only = ascii_only[: max_chars - 3] + "..."
    return ascii_only
