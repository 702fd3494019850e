"""A lease's deadline: when its node's dead-man's switch destroys it on its own (the lease's
`running_at` + the run's `[limits] max_hours` as its record keeps it), dashboard or not.
`mvp-tui ls` and the exit receipt say it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mvp_tui.lease.records import LeaseRecord


def max_hours(config: Mapping[str, Any]) -> float | None:
    """The run's `[limits] max_hours` as its record keeps it (flat `limits.max_hours`, or a
    `limits` table); None when unset, 0 (no limit) or not a number."""
    value = config.get("limits.max_hours")
    limits = config.get("limits")
    if value is None and isinstance(limits, Mapping):
        value = limits.get("max_hours")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    hours = float(value)
    return hours if math.isfinite(hours) and hours > 0 else None


def deadline_at(lease: LeaseRecord, config: Mapping[str, Any]) -> float | None:
    """When the node's switch destroys this lease: it ran at `running_at`, plus max_hours."""
    hours = max_hours(config)
    if hours is None or lease.running_at is None:
        return None
    return round(lease.running_at + hours * 3600.0, 3)


def deadline_text(at: float | None, now: float) -> str:
    if at is None:
        return "no deadline"
    try:
        when = datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "deadline ?"
    return f"ends {when}" + (" (passed)" if at <= now else "")
