"""The node switch's verdict, bounded and reduced (seed 003 `preflight` and `one_line`).

Once the agent runs (its `config` phase record arrived over SSH), its switch must say
`ready` or `failed <reason>` within `VERDICT_TIMEOUT_S` (the seed's 3 minutes): a node that
never says is refused like one that says `failed`, with the seed's reason "no verdict within
180s". Every verdict reason is untrusted text from the node: reduced to one line of printable
ASCII of at most `VERDICT_CHARS` (escape sequences and controls dropped, secrets redacted
first); panes show it as plain text, never as markup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mvp_tui.datastream.frame import Frame
from mvp_tui.node_protocol import (
    NODE_AGENT_PHASE,
    WATCHDOG_PHASE,
    is_agent_channel,
    parse_record,
    record_type,
)
from mvp_tui.untrusted import strip_escapes

VERDICT_TIMEOUT_S = 180.0
VERDICT_CHARS = 200
# Said after a refusal's (cut) reason, so the way to rent without the switch is never lost.
OPT_OUT = "or set [limits] require_node_watchdog = false to rent without it"
_CONFIG_PHASE = "config"


def verdict_line(
    text: str, max_chars: int = VERDICT_CHARS, redact: Callable[[str], str] | None = None
) -> str:
    """`text` as the seed keeps a verdict: escape sequences stripped, secrets redacted, then
    only printable ASCII (controls and non-ASCII dropped), whitespace folded, at most
    `max_chars`, trimmed."""
    text = strip_escapes(text)
    if redact is not None:
        text = redact(text)
    kept = "".join(c if 32 <= ord(c) < 127 else (" " if c in "\t\r\n" else "") for c in text)
    return " ".join(kept.split())[:max_chars].strip()


def no_verdict_reason(timeout_s: float) -> str:
    return f"no verdict within {timeout_s:g}s"


class VerdictWait:
    """A hub listener: from the agent's `config` record on, the switch's verdict must come
    within `timeout_s`; `expired()` returns the refusal's reason when it does not."""

    def __init__(self, timeout_s: float = VERDICT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._agent_runs = asyncio.Event()
        self._verdict = asyncio.Event()

    def reset(self) -> None:
        """A new attempt's node: nothing heard from it yet."""
        self._agent_runs.clear()
        self._verdict.clear()

    def __call__(self, frame: Frame) -> None:
        if not is_agent_channel(frame.channel):
            return
        record = parse_record(frame.payload)
        if record_type(record) != NODE_AGENT_PHASE:
            return
        phase, status = record.get("phase"), record.get("status")
        if phase == _CONFIG_PHASE:
            self._agent_runs.set()
        elif phase == WATCHDOG_PHASE and status in ("ready", "failed"):
            self._verdict.set()

    async def expired(self) -> str:
        """Returns the reason once the agent ran `timeout_s` without a verdict; waits for
        ever when a verdict came (or the agent never ran)."""
        await self._agent_runs.wait()
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._verdict.wait()
        except TimeoutError:
            return no_verdict_reason(self.timeout_s)
        await asyncio.Event().wait()  # the verdict came: nothing to refuse
        raise AssertionError("unreachable")
