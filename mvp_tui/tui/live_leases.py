"""What the status bar needs to know about leases: which are live, at what $/h, since when.

Kept from lease events alone, so the header and the Leases pane can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.lease.spend import spend_usd


@dataclass(slots=True)
class _Live:
    price_per_hour: float
    since: float


class LiveLeases:
    def __init__(self) -> None:
        self._live: dict[str, _Live] = {}
        self._closed_spend = 0.0
        self.forced = 0  # a count set from outside (the bare shell in tests)
        # Network volumes the run mounts (id → $/month): they bill by the month, lease or not.
        self.volumes: dict[str, float] = {}

    @property
    def count(self) -> int:
        return max(len(self._live), self.forced)

    def handle(self, event: EngineEvent) -> None:
        if isinstance(event, lease.VolumeMounted):
            self.volumes[event.volume_id] = event.usd_per_month
        elif isinstance(event, lease.LeaseRunning):
            self._live[event.provider_id] = _Live(event.price_per_hour, event.at)
        elif (
            isinstance(event, lease.LeaseDeleted)
            and self._live.pop(event.provider_id, None) is not None
        ):
            self._closed_spend += event.spend_usd

    def ids(self) -> list[str]:
        return list(self._live)

    def price_of(self, provider_id: str) -> float | None:
        live = self._live.get(provider_id)
        return live.price_per_hour if live is not None else None

    def price_per_hour(self) -> float:
        return sum(live.price_per_hour for live in self._live.values())

    def spent_usd(self, now: float) -> float:
        running = sum(spend_usd(live.price_per_hour, max(0.0, now - live.since))
                      for live in self._live.values())
        return self._closed_spend + running
