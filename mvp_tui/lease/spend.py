"""Estimated spend: price per hour times uptime. Pure functions; the clock is passed in.

Uptime runs from the create answer (the provider bills from then: storage at least) to the
confirmed delete, or to `now` while the lease may still bill. It is an estimate: the
provider's invoice is the truth.
"""

from __future__ import annotations

from collections.abc import Iterable

from mvp_tui.lease.records import LeaseRecord


def lease_uptime_s(lease: LeaseRecord, now: float) -> float:
    """Seconds the lease has (had) existed, 0 when it never was confirmed created."""
    if lease.created_at is None:
        return 0.0
    end = lease.deleted_at if lease.deleted_at is not None else now
    return max(0.0, end - lease.created_at)


def spend_usd(price_per_hour: float, uptime_s: float) -> float:
    """USD for `uptime_s` seconds at `price_per_hour`."""
    return max(0.0, price_per_hour) * max(0.0, uptime_s) / 3600.0


def lease_spend_usd(lease: LeaseRecord, now: float) -> float:
    return spend_usd(lease.price_per_hour, lease_uptime_s(lease, now))


def total_spend_usd(leases: Iterable[LeaseRecord], now: float) -> float:
    """The run's estimated spend over every lease it made."""
    return sum(lease_spend_usd(lease, now) for lease in leases)


def live_rate_per_hour(leases: Iterable[LeaseRecord]) -> float:
    """USD/h of every lease that may still bill (the header's "$/h")."""
    return sum(lease.price_per_hour for lease in leases if lease.may_bill and lease.created_at)
