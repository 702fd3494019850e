"""The run's spending limits, enforced: `[limits] max_spend_usd` and `max_hours` tear the
lease down when reached (`max_price_per_hour` is enforced by the offer policy and the walk,
before create). Unset or 0 means no limit, for each of them, except that an unset `max_hours`
is `BILLING_MAX_HOURS` on a rented provider (`Config.max_hours`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config import Config
from mvp_tui.config.sections.limits import LimitsSection
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.lease.records import LeaseRecord

CHECK_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Limits:
    """[limits] as typed settings; None means no limit (the key unset, or set to 0)."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "max_spend_usd": "limits.max_spend_usd",
        "max_hours": "limits.max_hours",
        "max_price_per_hour": "limits.max_price_per_hour",
    }

    max_spend_usd: float | None = LimitsSection.max_spend_usd
    max_hours: float | None = LimitsSection.max_hours
    max_price_per_hour: float | None = LimitsSection.max_price_per_hour  # policy's and walk's cap

    @classmethod
    def from_config(cls, config: Config) -> Limits:
        # A 0 of the spend and price caps reaches here as None already (the key table
        # declares 0 = unset); max_hours keeps its 0, which means "none" where unset does not.
        limits = config.settings.limits
        return cls(
            max_spend_usd=limits.max_spend_usd,
            max_hours=config.max_hours,
            max_price_per_hour=limits.max_price_per_hour,
        )

    def breach(
        self, ledger: LeaseLedger, now: float, run_id: str | None = None
    ) -> tuple[str, float, float] | None:
        """(limit, its value, what was reached) once a limit is reached, else None. Read
        from the ledger (the figures the user sees): every lease of the run counts — a
        multi-node run's workers and every earlier attempt's host — spend adds up, hours
        run from the oldest."""
        if self.max_spend_usd is not None:
            spent = ledger.spent(now, run_id)
            if spent >= self.max_spend_usd:
                return "max_spend_usd", self.max_spend_usd, spent
        if self.max_hours is not None:
            hours = ledger.hours(now, run_id)
            if hours >= self.max_hours:
                return "max_hours", self.max_hours, hours
        return None

    @property
    def any(self) -> bool:
        """A limit the run's guard watches (spend or hours) is set."""
        return self.max_spend_usd is not None or self.max_hours is not None


async def watch_limits(
    limits: Limits,
    ledger: LeaseLedger,
    run_id: str,
    lease: Callable[[], LeaseRecord | None],
    clock: Callable[[], float],
    *,
    every_s: float = CHECK_EVERY_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[LeaseRecord, tuple[str, float, float]]:
    """Returns (the serving lease, the breach) when a limit is reached; runs until then."""
    while True:
        current = lease()
        if current is not None and (breach := limits.breach(ledger, clock(), run_id)):
            return current, breach
        await sleep(every_s)
