"""The Prompt pane's conversation: the turns sent with each new question, fitted to the context.

Each request carries the system prompt, as many of the latest turns as fit `[model]
max_context` (with room kept for the answer), and the new question; turns are dropped from
the oldest. Tokens are estimated, not counted: UTF-8 bytes / 4 (about right for English with
the BPE vocabularies of served models; a round trip to the engine's tokenizer per request
would cost more than it saves), plus a few tokens a message for the chat template's markers.
A request the engine still finds too long is refused with its own message and fix.

What is kept is bounded: turns that no longer fit the context even alone are never sent
again, so they are let go, and at most `MAX_TURNS` are kept whatever their size.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # httpx loads with the client, when the first prompt runs
    from mvp_tui.prompt.client import ChatMessage

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # a chat template's role markers and separators, in tokens
MAX_TURNS = 256


def estimate_tokens(text: str) -> int:
    """The tokens a message costs, estimated: its UTF-8 bytes / 4, plus the template's."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN) + MESSAGE_OVERHEAD


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    tokens: int  # both messages, estimated


@dataclass(frozen=True, slots=True)
class Request:
    """The messages of one request and how many earlier turns they carry or leave out."""

    messages: list[ChatMessage]
    turns_sent: int
    turns_dropped: int


class Conversation:
    """The turns of the pane's conversation, and the messages of its next request."""

    def __init__(self, context: int, *, system: str | None = None) -> None:
        self.context = context
        self.system = system or None
        self._system_tokens = estimate_tokens(system) if system else 0
        self._turns: deque[Turn] = deque()
        self.recorded = 0  # turns of this conversation ever recorded (the kept and the let go)
        self.generation = 0  # bumped by `clear`: an answer of the last one is not recorded

    def __len__(self) -> int:
        return len(self._turns)

    def request(self, question: str, max_tokens: int) -> Request:
        """The messages for `question`: the latest turns that fit beside it and its answer."""
        budget = self.context - max_tokens - self._system_tokens - estimate_tokens(question)
        sent: list[Turn] = []
        for turn in reversed(self._turns):
            if turn.tokens > budget:
                break
            budget -= turn.tokens
            sent.append(turn)
        sent.reverse()
        messages: list[ChatMessage] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        for turn in sent:
            messages.append({"role": "user", "content": turn.question})
            messages.append({"role": "assistant", "content": turn.answer})
        messages.append({"role": "user", "content": question})
        return Request(messages, len(sent), self.recorded - len(sent))

    def record(self, question: str, answer: str, generation: int) -> None:
        """A finished turn joins the conversation (not when it was cleared meanwhile)."""
        if generation != self.generation:
            return
        tokens = estimate_tokens(question) + estimate_tokens(answer)
        self._turns.append(Turn(question, answer, tokens))
        self.recorded += 1
        # Let go of what can never be sent again: the turns past the context on their own.
        room = self.context - self._system_tokens
        total = sum(turn.tokens for turn in self._turns)
        while self._turns and (total > room or len(self._turns) > MAX_TURNS):
            total -= self._turns.popleft().tokens

    def clear(self) -> None:
        """A new conversation: no turn is sent any more."""
        self._turns.clear()
        self.recorded = 0
        self.generation += 1
