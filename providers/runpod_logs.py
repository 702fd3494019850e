"""A pod's last log lines: `GET /v2/pods/{id}/logs?tail=N` (getPodLogs in RunPod's v2 OpenAPI
document), read before the pod is deleted, since RunPod drops its logs with it (seed 003).

The answer is a Server-Sent Events stream that stays open: the backfill of `tail` lines comes
first, then live lines. Each event's `data:` is `{"source", "line", "ts"}`. The read stops
after `lines` lines, after `idle_s` without a new one (the backfill is over), or after
`total_s`; whatever came is kept. The lines are untrusted: cleaned and redacted here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import httpx

from mvp_tui.untrusted import Redact, clean_line

IDLE_S = 0.5
TOTAL_S = 4.0
LINE_CHARS = 500


def event_line(data: str) -> str | None:
    """The log line an SSE `data:` payload carries, None when it carries none."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    line = value.get("line") if isinstance(value, dict) else None
    if not isinstance(line, str):
        return None
    source = value.get("source")
    return f"[{source}] {line}" if isinstance(source, str) and source else line


async def _next(lines: AsyncIterator[str], idle_s: float) -> str | None:
    try:
        async with asyncio.timeout(idle_s):
            return await anext(lines)
    except (StopAsyncIteration, TimeoutError):
        return None


async def read_tail(
    client: httpx.AsyncClient,
    path: str,
    lines: int,
    redact: Redact,
    *,
    idle_s: float = IDLE_S,
    total_s: float = TOTAL_S,
) -> list[str]:
    """Up to `lines` of the pod's last log lines, oldest first; [] when there are none or
    the API does not answer 200 (a best-effort read never raises for an HTTP answer)."""
    kept: list[str] = []
    headers = {"Accept": "text/event-stream"}
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(total_s):
            async with client.stream(
                "GET", f"{path}/logs", params={"tail": lines}, headers=headers
            ) as response:
                if response.status_code != 200:
                    return []
                stream = response.aiter_lines()
                while len(kept) < lines:
                    raw = await _next(stream, idle_s)
                    if raw is None:
                        break
                    if not raw.startswith("data:"):
                        continue
                    line = event_line(raw[len("data:") :].strip())
                    if line is not None:
                        kept.append(clean_line(line, LINE_CHARS, redact=redact))
    return kept
