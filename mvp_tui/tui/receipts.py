"""What the dashboard prints once it has left the screen: one line per lease it held, and the
run's total, so the shell says what happened to the money after the full-screen app is gone.

    lease 8001 (vastai, RTX 4090): destroyed, confirmed by the provider · 0:00:25 · $0.0018
        (billed $0.0018)
    lease 8002 (vastai, RTX 3090): KEPT RUNNING, still bills $0.300/h · 0:01:10 · $0.0058
        so far; end it with `mvp-tui down r-7f3a`
    run r-7f3a: 2 leases · $0.0076 · 1 may still bill

(each lease is one line; wrapped here).

Kept from lease events alone (as `LiveLeases` is), so it agrees with the Leases pane.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.lease.spend import spend_usd
from mvp_tui.untrusted import clean_line


@dataclass(slots=True)
class _Held:
    run_id: str
    provider: str
    gpu: str
    price_per_hour: float
    since: float  # the create's answer: billing starts there
    state: str = "live"  # live, destroyed, unconfirmed
    uptime_s: float = 0.0
    spend: float = 0.0
    billed: float | None = None


class LeaseReceipts:
    """Every lease the dashboard held, by provider id, in the order they were created."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._gpu_of: dict[str, tuple[str, float]] = {}  # attempt label -> (GPU, $/h)

    def handle(self, event: EngineEvent, provider: str) -> None:
        """One engine event; `provider` is the kind of the engine that emitted it."""
        if isinstance(event, lease.AttemptStarted):
            self._gpu_of[event.label] = (event.gpu_name, event.price_per_hour)
        elif isinstance(event, lease.AttemptAnswered) and event.provider_id:
            gpu, price = self._gpu_of.get(event.label, ("", 0.0))
            self._held.setdefault(event.provider_id,
                                  _Held(event.run_id, provider, gpu, price, event.at))
        elif isinstance(event, lease.LeaseRunning):
            fresh = _Held(event.run_id, provider, "", 0.0, event.at)
            held = self._held.setdefault(event.provider_id, fresh)
            held.price_per_hour = event.price_per_hour or held.price_per_hour
        elif isinstance(event, lease.LeaseDeleted) and event.provider_id in self._held:
            held = self._held[event.provider_id]
            held.state, held.uptime_s, held.spend = "destroyed", event.uptime_s, event.spend_usd
            held.billed = event.billed_usd
        elif isinstance(event, lease.LeaseDeleteUnconfirmed) and event.provider_id in self._held:
            self._held[event.provider_id].state = "unconfirmed"

    @property
    def named(self) -> frozenset[str]:
        """The provider ids these lines speak for."""
        return frozenset(self._held)

    def lines(self, now: float) -> list[str]:
        """The receipt: a line per lease, then the run's total (none when nothing was held)."""
        out = [self._line(pid, held, now) for pid, held in self._held.items()]
        if not out:
            return []
        out += self._totals(now)
        return out

    def _line(self, provider_id: str, held: _Held, now: float) -> str:
        what = ", ".join(clean_line(t, 40) for t in (held.provider, held.gpu) if t)
        head = f"lease {clean_line(provider_id, 40)} ({what})"
        if held.state == "destroyed":
            billed = f" (billed ${held.billed:.4f})" if held.billed is not None else ""
            return (f"{head}: destroyed, confirmed by the provider · {clock_text_h(held.uptime_s)}"
                    f" · ${held.spend:.4f}{billed}")
        uptime = max(0.0, now - held.since)
        spend = spend_usd(held.price_per_hour, uptime)
        why = "KEPT RUNNING" if held.state == "live" else "teardown NOT confirmed"
        return (f"{head}: {why}, still bills ${held.price_per_hour:.3f}/h · "
                f"{clock_text_h(uptime)} · ${spend:.4f} so far; end it with "
                f"`mvp-tui down {clean_line(held.run_id, 64)}`")

    def _totals(self, now: float) -> list[str]:
        by_run: dict[str, list[_Held]] = {}
        for held in self._held.values():
            by_run.setdefault(held.run_id, []).append(held)
        return [self._total(run_id, leases, now) for run_id, leases in by_run.items()]

    def _total(self, run_id: str, leases: Iterable[_Held], now: float) -> str:
        leases = list(leases)
        spent = sum(h.spend if h.state == "destroyed"
                    else spend_usd(h.price_per_hour, max(0.0, now - h.since))
                    for h in leases)
        billed = [h.billed for h in leases]
        billed_text = (f" (billed ${sum(b for b in billed if b is not None):.4f})"
                       if all(b is not None for b in billed) else "")
        live = sum(1 for h in leases if h.state != "destroyed")
        tail = f" · {live} may still bill" if live else " · nothing bills"
        count = f"{len(leases)} lease" + ("s" if len(leases) != 1 else "")
        return f"run {clean_line(run_id, 64)}: {count} · ${spent:.4f}{billed_text}{tail}"


def clock_text_h(seconds: float) -> str:
    """`0:00:25`: a lease's uptime, always with its hours."""
    text = clock_text(seconds)
    return text if text.count(":") == 2 else f"0:{text.zfill(5)}"
