"""Where a streaming answer's text breaks: its plain lines at a width, and the markdown
blocks it has closed so far (pure text, no Textual: `widgets/transcript_view.py` draws them).
"""

from __future__ import annotations

import re

FENCES = ("```", "~~~")
_WORD = re.compile(r"\S+")


def wrap_spans(text: str, width: int) -> list[tuple[int, int]]:
    """A greedy word wrap of one line of one-cell characters: where each wrapped line
    starts and ends in `text` (the spaces at a break end the line before; a word longer
    than `width` is folded). A break never moves once the text after it overflowed, so
    text appended later changes only the last line."""
    spans: list[tuple[int, int]] = []
    start = 0
    for word in _WORD.finditer(text):
        word_start, word_end = word.span()
        if word_end - start <= width:
            continue
        if word_start > start and not text[start:word_start].isspace():
            spans.append((start, word_start))
            start = word_start
        while word_end - start > width:
            spans.append((start, start + width))
            start += width
    spans.append((start, len(text)))
    return spans


def settled_end(text: str, start: int) -> int:
    """Where the markdown blocks closed after `start` end: just past the last blank line
    that is not inside a code fence (`start` when none closed since)."""
    end, fenced, at = start, False, start
    while True:
        newline = text.find("\n", at)
        if newline == -1:
            return end
        line = text[at:newline]
        if line.lstrip().startswith(FENCES):
            fenced = not fenced
        elif not line.strip() and not fenced and at > start:
            end = newline + 1
        at = newline + 1
