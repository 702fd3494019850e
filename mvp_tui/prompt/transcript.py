"""The Prompt pane's transcript as saved (ctrl+s): every turn, as Markdown, in a bounded log.

The pane shows only its last turns; the older ones stay here, so the saved file has them,
up to `KEPT_TURNS` (a dashboard serving a team's tools for a day must not grow with every
prompt: past that, the oldest go and the file says how many). The text is the engine's,
cleaned of escapes (`safe_answer`); it goes to a file the user asked for, never to the
datastream archive.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.prompt.display import safe_answer

KEPT_TURNS = 500
TRANSCRIPT_FILE = "transcript-{stamp}.md"


@dataclass(frozen=True, slots=True)
class SavedTurn:
    question: str
    answer: str
    figures: str  # the figures line (tok, tok/s, TTFT, cost) or the fault
    dropped_before: int = 0  # earlier turns the request left out (the context was full)


class TranscriptLog:
    """The turns of the pane's conversations, oldest first, at most `kept`."""

    def __init__(self, kept: int = KEPT_TURNS) -> None:
        self._turns: deque[SavedTurn] = deque(maxlen=kept)
        self.let_go = 0  # turns no longer kept (the oldest, past `kept`)

    def __len__(self) -> int:
        return len(self._turns)

    def add(self, turn: SavedTurn) -> None:
        if self._turns.maxlen is not None and len(self._turns) == self._turns.maxlen:
            self.let_go += 1
        self._turns.append(turn)

    def new_conversation(self) -> None:
        """ctrl+n: a rule in the file; the next turns are a conversation of their own."""
        self.add(SavedTurn("", "", "", dropped_before=-1))

    @property
    def last_answer(self) -> str | None:
        for turn in reversed(self._turns):
            if turn.dropped_before >= 0 and turn.answer:
                return turn.answer
        return None

    def markdown(self, title: str) -> str:
        lines = [f"# {title}", ""]
        if self.let_go:
            lines += [f"*({self.let_go} earlier turns were not kept.)*", ""]
        for turn in self._turns:
            if turn.dropped_before < 0:
                lines += ["---", "", "*(a new conversation)*", ""]
                continue
            if turn.dropped_before:
                lines += [f"*({turn.dropped_before} earlier turns were not sent with the "
                          "next question: the context was full.)*", ""]
            quoted = "\n".join(f"> {line}" for line in safe_answer(turn.question).splitlines())
            lines += [quoted or ">", "", safe_answer(turn.answer), "", f"*{turn.figures}*", ""]
        return "\n".join(lines)

    def save(self, directory: Path, title: str, now: float | None = None) -> Path:
        """Write the transcript into `directory` (created, private) as a 0600 file, atomically,
        and return its path."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / TRANSCRIPT_FILE.format(stamp=stamp)
        # As every record of the run: private, and never half written.
        write_atomic(path, self.markdown(title).encode("utf-8"))
        return path
