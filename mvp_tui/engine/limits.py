"""The run's spending limits, enforced: `[limits] max_spend_usd` and `max_hours` tear the
lease down when reached (`max_price_per_hour` is enforced by the walk, before create)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mvp_tui.events import EngineEvent
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.lease.spend import lease_spend_usd, lease_uptime_s

CHECK_EVERY_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitReached(EngineEvent):
    run_id: str
    provider_id: str
    limit: str  # "max_spend_usd" | "max_hours"
    value: float
    reached: float


@dataclass(frozen=True, slots=True)
class Limits:
    max_spend_usd: float | None = None
    max_hours: float | None = None

    def breach(self, lease: LeaseRecord, now: float) -> tuple[str, float, float] | None:
        """(limit, its value, what was reached) once a limit is reached, else None."""
        if self.max_spend_usd is not None:
            spent = lease_spend_usd(lease, now)
            if spent >= self.max_spend_usd:
                return "max_spend_usd", self.max_spend_usd, spent
        if self.max_hours is not None:
            hours = lease_uptime_s(lease, now) / 3600.0
            if hours >= self.max_hours:
                return "max_hours", self.max_hours, hours
        return None

    @property
    def any(self) -> bool:
        return self.max_spend_usd is not None or self.max_hours is not None


async def watch_limits(
    limits: Limits,
    lease: Callable[[], LeaseRecord | None],
    clock: Callable[[], float],
    *,
    every_s: float = CHECK_EVERY_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[LeaseRecord, tuple[str, float, float]]:
    """Returns (the lease, the breach) when a limit is reached; runs until then."""
    while True:
        current = lease()
        if current is not None and (breach := limits.breach(current, clock())) is not None:
            return current, breach
        await sleep(every_s)
