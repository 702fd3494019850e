"""How the node's dead-man's switch reads on screen: shared by the Bootstrap and Leases panes.

The switch runs in the node agent (`mvp_tui/node/switch.py`): a deadline (`[limits] max_hours`)
and a silence limit (`[limits] idle_teardown_mins`) after which the node destroys its own
lease. Numbers here come from the node, so each is checked before it is shown.
"""

from __future__ import annotations

import math
from datetime import datetime, tzinfo

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def finite(value: float | None) -> float | None:
    """`value` when it is a usable number (not NaN or infinite), else None."""
    return value if value is not None and math.isfinite(value) else None


def wall_text(at: float, tz: tzinfo | None, ref: float | None = None) -> str:
    """HH:MM of `at` in `tz` (None: local time), with the day ("Dec 01 14:32") when it is
    not the day of `ref`; "?" for a time no calendar holds."""
    try:
        when = datetime.fromtimestamp(at, tz)
        same_day = ref is None or datetime.fromtimestamp(ref, tz).date() == when.date()
    except (OverflowError, OSError, ValueError):
        return "?"
    hm = f"{when.hour:02d}:{when.minute:02d}"
    return hm if same_day else f"{_MONTHS[when.month - 1]} {when.day:02d} {hm}"


def minutes_text(mins: float) -> str:
    return f"{mins:.4g} min"


def armed_text(
    *,
    armed: bool,
    deadline_at: float | None,
    idle_mins: float | None,
    idle_armed: bool = True,
    tz: tzinfo | None,
    ref: float | None,
    compact: bool = False,
) -> str:
    """The verdict `ready` in words: "armed · deadline 14:32 · silence 20 min".

    `compact` is the short form for a narrow pane: "armed · ends 14:32"."""
    deadline, idle = finite(deadline_at), finite(idle_mins)
    idle = idle if idle is not None and idle > 0 else None
    parts = ["armed" if armed else "not armed"]
    if deadline is not None:
        hm = wall_text(deadline, tz, ref)
        parts.append(f"ends {hm}" if compact else f"deadline {hm}")
    if idle is not None and not (compact and deadline is not None):
        parts.append(f"silence {minutes_text(idle)}" if idle_armed else "silence off (detached)")
    if deadline is None and idle is None:
        parts.append("no limit" if compact else "no deadline or silence limit")
    return " · ".join(parts)
