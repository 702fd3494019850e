"""The run's spending limits, enforced: `[limits] max_spend_usd` and `max_hours` tear the
lease down when reached (`max_price_per_hour` is enforced by the offer policy and the walk,
before create). Unset or 0 means no limit, for each of them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from mvp_tui.config import Config
from mvp_tui.events import EngineEvent
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.lease.spend import lease_uptime_s, total_spend_usd

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
    """[limits] as typed settings; None means no limit (the key unset, or set to 0)."""

    max_spend_usd: float | None = None
    max_hours: float | None = None
    max_price_per_hour: float | None = None  # the offer policy's and the walk's cap

    @classmethod
    def from_config(cls, config: Config) -> Limits:
        # A 0 reaches here as None already: the key table declares 0 = unset for each.
        limits = config.settings.limits
        return cls(
            max_spend_usd=limits.max_spend_usd,
            max_hours=limits.max_hours,
            max_price_per_hour=limits.max_price_per_hour,
        )

    def breach(
        self, lease: LeaseRecord, now: float, others: Sequence[LeaseRecord] = ()
    ) -> tuple[str, float, float] | None:
        """(limit, its value, what was reached) once a limit is reached, else None. `others`:
        the run's other leases (a multi-node run's workers) — spend adds up, hours run
        from the oldest."""
        leases = [lease, *others]
        if self.max_spend_usd is not None:
            spent = total_spend_usd(leases, now)
            if spent >= self.max_spend_usd:
                return "max_spend_usd", self.max_spend_usd, spent
        if self.max_hours is not None:
            hours = max(lease_uptime_s(x, now) for x in leases) / 3600.0
            if hours >= self.max_hours:
                return "max_hours", self.max_hours, hours
        return None

    @property
    def any(self) -> bool:
        """A limit the run's guard watches (spend or hours) is set."""
        return self.max_spend_usd is not None or self.max_hours is not None


async def watch_limits(
    limits: Limits,
    lease: Callable[[], LeaseRecord | None],
    clock: Callable[[], float],
    *,
    every_s: float = CHECK_EVERY_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    others: Callable[[], Sequence[LeaseRecord]] = tuple,
) -> tuple[LeaseRecord, tuple[str, float, float]]:
    """Returns (the lease, the breach) when a limit is reached; runs until then."""
    while True:
        current = lease()
        if current is None:
            await sleep(every_s)
            continue
        if (breach := limits.breach(current, clock(), others())) is not None:
            return current, breach
        await sleep(every_s)
