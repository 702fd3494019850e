"""Prompt events as the seed's `OrchPromptEvent` records on the `mvp.orch.prompt` channel.

The datastream archives and replays these; the payload shapes (type, phase, status, run_id,
node_id, request_id, detail) follow the seed so old tooling can read new archives. Answer text
never goes on the channel, only its size.
"""

from __future__ import annotations

from typing import Any

from mvp_tui.events import EngineEvent
from mvp_tui.prompt.events import (
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptQueued,
    PromptStarted,
    TextDelta,
)

MVP_ORCH_PROMPT = "mvp.orch.prompt"


def orch_prompt_records(event: EngineEvent, *, run_id: int, node_id: int) -> list[dict[str, Any]]:
    """The channel payloads for one prompt event (none for events that are not a prompt's)."""
    steps = _steps(event)
    if not steps:
        return []
    request_id = getattr(event, "prompt_id", 0)
    return [
        {
            "type": "OrchPromptEvent",
            "phase": phase,
            "status": status,
            "run_id": run_id,
            "node_id": node_id,
            "request_id": request_id,
            "detail": detail,
        }
        for phase, status, detail in steps
    ]


def _steps(event: EngineEvent) -> list[tuple[str, str, dict[str, Any]]]:
    detail: dict[str, Any]
    if isinstance(event, PromptQueued):
        detail = {
            "prompt_chars": event.text_chars,
            "max_tokens": event.max_tokens,
            "position": event.position,
            "source": event.source.value,
        }
        return [("prompt_work", "observed", detail)]
    if isinstance(event, PromptStarted):
        return [("node_prompt_send", "started", {})]
    if isinstance(event, TextDelta):
        detail = {"event": "TextDelta", "terminal": False, "text_bytes": len(event.text.encode())}
        return [("node_prompt_event", "observed", detail)]
    if isinstance(event, PromptDone):
        detail = {
            "event": "Done",
            "terminal": True,
            "tokens_generated": event.tokens_generated,
            "elapsed_ms": event.elapsed_ms,
            "ttft_ms": event.ttft_ms,
            "final_text_bytes": len(event.final_text.encode()),
        }
        return [
            ("node_prompt_event", "observed", detail),
            ("prompt_complete", "ready", {"event": "Done"}),
        ]
    if isinstance(event, PromptFault):
        detail = {"event": "Fault", "terminal": True, "error": event.error}
        return [
            ("node_prompt_event", "observed", detail),
            ("prompt_complete", "failed", {"event": "Fault", "error": event.error}),
        ]
    if isinstance(event, PromptCancelled):
        # The seed has no "cancelled" status: a cancelled prompt was dropped, and says why.
        detail = {"event": "Cancelled", "reason": "cancelled", "was_active": event.was_active}
        return [("prompt_complete", "dropped", detail)]
    return []
