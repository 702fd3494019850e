"""The top line: run id, provider, profile, live leases, $/h, spend, cap and the clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from mvp_tui.engine.ledger import money_text

if TYPE_CHECKING:
    from mvp_tui.engine.run_status import RunStatus


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the status bar shows; the dashboard replaces it whenever the run's status or
    its ledger moves."""

    run_id: str | None = None
    provider: str = "local"
    profile: str = "local"
    live_leases: int = 0
    price_per_hour: float = 0.0
    spent_usd: float = 0.0
    cap_usd: float | None = None
    replay: str | None = None  # "replay FILE · 2.0× · frame 120/400 · paused" in replay mode
    label: str = ""  # "rehearsal": a simulated marketplace, nothing real is rented
    rate_trend: str = ""  # a sparkline of the session's $/h
    volume_usd_per_month: float = 0.0  # network volumes kept between runs ($/GB·month)

    @classmethod
    def of(cls, status: RunStatus, now: float, *, profile: str, label: str = "",
           rate_trend: str = "") -> RunSummary:
        """The run's line: its status, and the figures of its ledger at `now` (the cap is
        `[limits] max_spend_usd` as the run's engine reads it)."""
        ledger = status.ledger
        return cls(
            run_id=status.run_id, provider=status.provider_name, profile=profile,
            live_leases=ledger.live, price_per_hour=ledger.rate(), spent_usd=ledger.spent(now),
            cap_usd=status.limits.max_spend_usd, label=label, rate_trend=rate_trend,
            volume_usd_per_month=ledger.volume_usd_per_month,
        )

    def with_spend(self, price_per_hour: float, spent_usd: float, live: int) -> RunSummary:
        return replace(self, price_per_hour=price_per_hour, spent_usd=spent_usd, live_leases=live)


class StatusBar(Widget):
    """One line; text only (no markup), so provider strings can never style it."""

    summary: reactive[RunSummary] = reactive(RunSummary, layout=False)

    def __init__(self, clock: Callable[[], datetime], *, id: str | None = "status-bar") -> None:
        super().__init__(id=id)
        self._clock = clock

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh)

    def render(self) -> Text:
        s = self.summary
        if s.replay is not None:
            text = Text()
            text.append(" mvp-tui ", style="bold reverse")
            text.append(f"  {s.replay} · read-only: no provider is called")
            return text
        live = "no lease live" if s.live_leases == 0 else f"{s.live_leases} lease(s) live"
        # (drop rank, separator, words): a narrow terminal gives up the highest rank first,
        # and the money ($/h, spent, the cap: rank 0) is never what is cut.
        parts: list[tuple[int, str, str]] = [
            (3, "", f"run {s.run_id or '—'}"), (5, " · ", s.provider), (6, " · ", s.profile),
            (0, " · ", live), (0, " · ", f"${s.price_per_hour:.2f}/h"),
        ]
        if s.rate_trend:
            parts.append((4, " ", s.rate_trend))
        parts.append((0, " · ", f"spent {money_text(s.spent_usd)}"))
        if s.volume_usd_per_month:
            parts.append((1, " · ", f"volume ${s.volume_usd_per_month:.2f}/month"))
        if s.cap_usd is not None:
            parts.append((0, " · ", f"cap ${s.cap_usd:.2f}"))
        text = Text()
        text.append(" mvp-tui ", style="bold reverse")
        if s.label:
            text.append(f" {s.label.upper()} ", style="bold reverse")
        clock = self._clock().strftime("%H:%M:%S")
        width = self.size.width or 10_000
        body = _joined(parts)
        while width - text.cell_len - cell_len(body) < len(clock) + 2 and max(parts)[0]:
            worst = max(rank for rank, _, _ in parts)
            parts.remove(next(p for p in reversed(parts) if p[0] == worst))
            body = _joined(parts)
        text.append(body)
        room = width - text.cell_len - 1
        if room >= len(clock) + 1:  # the clock where it fits beside the rest
            text.append(" " * (room - len(clock)) + clock + " ")
        return text


def _joined(parts: list[tuple[int, str, str]]) -> str:
    body = "".join(sep + words for _, sep, words in parts)
    return "  " + body.removeprefix(" · ")
