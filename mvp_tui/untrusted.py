"""Text from providers and nodes is untrusted: make it safe to show and to log.

Terminal escape sequences (CSI, OSC, DCS, …) and control characters are removed, overlong
text is cut with a visible marker, and invalid UTF-8 is replaced for display. Rich markup is
never interpreted: callers render the result with `rich.text.Text(...)`, never as markup.
"""

from __future__ import annotations

import re

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
# C0 controls except tab, DEL, and C1 controls.
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x80-\x9f]")

DEFAULT_MAX_CHARS = 4096
CUT_MARKER = " … [cut {n} chars]"


def clean_line(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """One line of untrusted text, safe to print: no escapes, no controls, bounded length."""
    text = _ESCAPES.sub("", text)
    text = _CONTROLS.sub("", text)
    if len(text) > max_chars:
        cut = len(text) - max_chars
        text = text[:max_chars] + CUT_MARKER.format(n=cut)
    return text


def clean_bytes(data: bytes, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Like `clean_line` for raw bytes: invalid UTF-8 is shown as U+FFFD."""
    return clean_line(data.decode("utf-8", "replace"), max_chars)


def one_line_ascii(text: str, max_chars: int = 240) -> str:
    """A verdict line: printable ASCII only, whitespace folded, bounded (the seed's rule)."""
    text = clean_line(text, max_chars * 4)
    folded = " ".join(text.split())
    ascii_only = "".join(c if 32 <= ord(c) < 127 else "?" for c in folded)
    if len(ascii_only) > max_chars:
        ascii_only = ascii_only[: max_chars - 3] + "..."
    return ascii_only
