"""The boot guard, as the engine sees it: the verdict the agent read from the guard when it
started (the guard itself is sh in the create request: providers/boot_guard.py).

`require_node_watchdog` holds it as it holds the switch: a guard that cannot run on a billing
node stops the run (`NodeLink.check_watchdog`). A node where no guard ran says so and is not
refused, as a node that reports no switch is not.
"""

from __future__ import annotations

from collections.abc import Callable

from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.events import NodeBootGuard
from mvp_tui.node_protocol import (
    AGENT_CHANNEL_SUFFIX,
    BOOT_GUARD_PHASE,
    NODE_AGENT_PHASE,
    int_field,
    parse_record,
    record_type,
)
from mvp_tui.untrusted import clean_line

STATES = ("armed", "off", "none", "not_needed", "failed")


def boot_guard_event(
    frame: Frame, run_id: str, at: float, redact: Callable[[str], str] | None
) -> NodeBootGuard | None:
    """The agent's `boot_guard` phase in a frame, as an event; None for any other frame."""
    if not frame.channel.endswith(AGENT_CHANNEL_SUFFIX):
        return None
    record = parse_record(frame.payload)
    if record_type(record) != NODE_AGENT_PHASE or record.get("phase") != BOOT_GUARD_PHASE:
        return None
    raw = record.get("detail")
    detail = raw if isinstance(raw, dict) else {}
    state = detail.get("state")
    status = state if isinstance(state, str) and state in STATES else "failed"
    if record.get("status") == "failed":
        status = "failed"
    return NodeBootGuard(
        at=at,
        run_id=run_id,
        status=status,
        reason=clean_line(str(detail.get("reason") or ""), 400, redact=redact),
        grace_s=int_field(detail, "grace_s"),
        tool=clean_line(str(detail.get("tool") or ""), 16),
    )
