"""A pod's last log lines: `GET /v2/pods/{id}/logs?tail=N` (getPodLogs in RunPod's v2 OpenAPI
document), read before the pod is deleted, since RunPod drops its logs with it (seed 003),
and in the first minute after RUNNING, to see whether the start command ran (`start_verdict`).

The answer is a Server-Sent Events stream that stays open: the backfill of `tail` lines comes
first, then live lines. Each event's `data:` is `{"source", "line", "ts"}`. The read stops
after `lines` lines, after `idle_s` without a new one (the backfill is over), or after
`total_s`; whatever came is kept. The lines are untrusted: cleaned and redacted here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterable

import httpx

from mvp_tui.providers.runpod.boot import BOOT_MARKER
from mvp_tui.untrusted import Redact, clean_line

IDLE_S = 0.5
TOTAL_S = 4.0
LINE_CHARS = 500
# The first lines llama.cpp's images print when their entrypoint (`/app/tools.sh`, from
# llama.cpp's .devops/tools.sh) is handed arguments it does not know, as it is when RunPod
# passes the start command to it as arguments: `echo "Unknown command: $arg1"`, then
# `echo "Available commands: "` and the list (`--run (-r)`, `--server (-s)`, …).
ENTRYPOINT_USAGE = ("Unknown command:", "Available commands:")
_SOURCE_PREFIX = re.compile(r"^\[[a-z]+\] ")


def start_verdict(lines: Iterable[str]) -> tuple[bool | None, str]:
    """Whether the start command ran, from a pod's container log lines (`read_tail`'s, the
    `[source] ` prefix allowed): True at a boot line (`BOOT_MARKER` first on its line: the
    usage text quotes the whole start command, marker and all, but never starts with it),
    False with the first usage line when the image's own entrypoint printed its usage and no
    boot line came, None when the log tells neither (yet)."""
    usage = ""
    for line in lines:
        text = _SOURCE_PREFIX.sub("", line, count=1).lstrip()
        if text.startswith(BOOT_MARKER):
            return True, ""
        if not usage and text.startswith(ENTRYPOINT_USAGE):
            usage = text
    return (False, usage) if usage else (None, "")


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
    source: str | None = None,
) -> list[str]:
    """Up to `lines` of the pod's last log lines, oldest first; [] when there are none or
    the API does not answer 200 (a best-effort read never raises for an HTTP answer).
    `source`: `container` or `system` only (the document's LogSource); None: both."""
    kept: list[str] = []
    headers = {"Accept": "text/event-stream"}
    params: dict[str, str | int] = {"tail": lines}
    if source is not None:
        params["source"] = source
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(total_s):
            async with client.stream(
                "GET", f"{path}/logs", params=params, headers=headers
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
