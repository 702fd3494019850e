"""The prompt pane's input history: up recalls older prompts, down newer, like a shell."""

from __future__ import annotations

from collections import deque


class PromptHistory:
    """Submitted prompt texts, oldest first, with a browsing cursor for up/down."""

    def __init__(self, size: int = 200) -> None:
        self._entries: deque[str] = deque(maxlen=size)
        self._cursor: int | None = None  # index into _entries while browsing
        self._draft = ""

    def add(self, text: str) -> None:
        """Remember a submitted prompt (blank ones and repeats of the last are skipped)."""
        if text.strip() and (not self._entries or self._entries[-1] != text):
            self._entries.append(text)
        self._cursor = None

    def entries(self) -> list[str]:
        return list(self._entries)

    def older(self, draft: str = "") -> str | None:
        """The previous prompt (Up); `draft` is the unsent input, restored by `newer`."""
        if not self._entries:
            return None
        if self._cursor is None:
            self._draft = draft
            self._cursor = len(self._entries) - 1
        elif self._cursor > 0:
            self._cursor -= 1
        return self._entries[self._cursor]

    def newer(self) -> str | None:
        """The next prompt (Down); past the newest, the saved draft; None when not browsing."""
        if self._cursor is None:
            return None
        if self._cursor < len(self._entries) - 1:
            self._cursor += 1
            return self._entries[self._cursor]
        self._cursor = None
        return self._draft
