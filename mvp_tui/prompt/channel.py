"""Prompt events as the seed's `OrchPromptEvent` records on the `mvp.orch.prompt` channel.

The datastream archives and replays these; the payload shapes (type, phase, status, run_id,
node_id, request_id, detail) and the detail fields follow the orchestrator seed's prompt
records (`prompt_work` with
`prompt_bytes` and `max_tokens`, `node_prompt_send` started then ready, `node_prompt_event`,
`prompt_complete`) so old tooling can read new archives. `request_id` is the RPC client's own
id when the prompt came over the RPC, else the queue's. A cancelled prompt (the seed's RPC cannot
cancel one) ends with `prompt_complete` status `cancelled`. Answer text never goes on the
channel, only its size.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def orch_prompt_records(
    event: EngineEvent,
    *,
    run_id: int,
    node_id: int,
    request_ids: Mapping[int, int] | None = None,
) -> list[dict[str, Any]]:
    """The channel payloads for one prompt event (none for events that are not a prompt's).
    `request_ids` maps the queue's prompt ids to the RPC clients' own ids."""
    steps = _steps(event)
    if not steps:
        return []
    prompt_id = getattr(event, "prompt_id", 0)
    request_id = (request_ids or {}).get(prompt_id, prompt_id)
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
            "prompt_bytes": event.text_bytes,
            "max_tokens": event.max_tokens,
            "position": event.position,
            "source": event.source.value,
        }
        return [("prompt_work", "observed", detail)]
    if isinstance(event, PromptStarted):
        # The request goes to the node's OpenAI-compatible engine (the seed's node actor).
        detail = {"engine": "openai-compatible"}
        return [("node_prompt_send", "started", detail), ("node_prompt_send", "ready", detail)]
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
        detail = {"event": "Cancelled", "reason": "cancelled", "was_active": event.was_active}
        return [("prompt_complete", "cancelled", detail)]
    return []
