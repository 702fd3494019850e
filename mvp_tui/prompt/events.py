"""What the prompt client and queue report: one typed event per step of a prompt's life.

A prompt is queued, started, streams `TextDelta`s and ends with exactly one of `PromptDone`,
`PromptFault` or `PromptCancelled`. Delta text is the engine's, verbatim and untrusted: show it
only through `mvp_tui.prompt.display`, never as Rich markup.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mvp_tui.events import EngineEvent


class PromptSource(enum.Enum):
    """Who asked: the dashboard's prompt pane or a client of the prompt RPC."""

    PANE = "pane"
    RPC = "rpc"


class FaultKind(enum.Enum):
    """Why a prompt failed, so the pane can say what to do about it."""

    ENGINE_REJECTED = "engine_rejected"  # 4xx/5xx with the engine's own error message
    HTTP_ERROR = "http_error"  # 4xx/5xx without a readable engine message
    STREAM_ENDED_EARLY = "stream_ended_early"  # the stream stopped before [DONE]
    CONNECTION_REFUSED = "connection_refused"  # nothing listens at the endpoint
    TIMEOUT = "timeout"  # connect or read took too long
    BAD_STREAM = "bad_stream"  # a chunk that is not the OpenAI streaming shape
    CLIENT_ERROR = "client_error"  # our side failed (a bug or a bad client factory)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptQueued(EngineEvent):
    """A prompt joined the queue; `position` 0 means it starts right away."""

    prompt_id: int
    text_chars: int
    max_tokens: int
    position: int
    source: PromptSource = PromptSource.PANE
    text_bytes: int = 0  # UTF-8 size (the seed's `prompt_bytes`)
    request_id: int | None = None  # the RPC client's own id for this prompt


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptStarted(EngineEvent):
    """The prompt's request is being sent to the engine; a pane prompt carries its
    conversation's earlier turns, `turns_dropped` older ones left out to fit the context."""

    prompt_id: int
    turns_sent: int = 0
    turns_dropped: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(EngineEvent):
    """One piece of the answer as the engine streamed it (verbatim, untrusted)."""

    prompt_id: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptDone(EngineEvent):
    """The answer is complete. `cost_usd` is set when the lease has a known $/h."""

    prompt_id: int
    final_text: str
    tokens_generated: int
    elapsed_ms: int
    ttft_ms: int | None
    tokens_per_s: float
    finish_reason: str | None = None
    cost_usd: float | None = None
    # llama-server's own `timings` for the answer (None when the engine sends none): its
    # decode rate and prompt time, free of the network's share.
    engine_tokens_per_s: float | None = None
    engine_prompt_ms: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptFault(EngineEvent):
    """The prompt failed. `error` is sanitised, one line; `fix` says what to do when known."""

    prompt_id: int
    fault_kind: FaultKind
    error: str
    http_status: int | None = None
    code: str | None = None  # the engine's error code, e.g. "context_length_exceeded"
    fix: str | None = None
    partial_text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCancelled(EngineEvent):
    """The prompt was cancelled: while streaming (`was_active`) or while still queued."""

    prompt_id: int
    was_active: bool
    partial_text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRpcListening(EngineEvent):
    """The prompt RPC accepts connections at host:port."""

    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRpcFailed(EngineEvent):
    """The prompt RPC could not listen at `addr` (the seed's `prompt_rpc` failed); the run
    then fails with the same error."""

    addr: str
    error: str


PromptEnd = PromptDone | PromptFault | PromptCancelled
"""The events that end a prompt; exactly one follows every `PromptQueued`."""

StreamEvent = TextDelta | PromptDone | PromptFault
"""What `PromptClient.stream` yields: deltas, then one `PromptDone` or `PromptFault`."""


def is_end(event: EngineEvent) -> bool:
    """True for the one event that ends a prompt."""
    return isinstance(event, PromptDone | PromptFault | PromptCancelled)
