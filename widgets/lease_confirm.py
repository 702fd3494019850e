"""The confirm before anything bills: the offers in the order they will be tried, the limits,
and what happens when a step fails. Focus starts on Cancel; it returns True to lease."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from mvp_tui.engine.model_fit import UNKNOWN, Fit, FitVerdict
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.dialog import Choice, DialogScreen

ON_FAILURE = (
    "If an offer is gone or refused, the next one is tried. A lease that does not become "
    "ready is destroyed, and the provider must confirm it is gone before the next offer is "
    "tried. If the run fails, everything it created is destroyed and each destroy confirmed; "
    "a destroy that cannot be confirmed is reported (exit code 3), never assumed."
)
ON_OUTBID = (
    "Interruptible: a $/h marked bid is our bid, not a fixed price. If someone outbids it, "
    "Vast.ai pauses the instance (what runs on it stops, its storage still bills): the run "
    "destroys it, confirmed, and moves to the next offer with the same local addresses."
)


@dataclass(frozen=True, slots=True)
class LeaseLimits:
    """The run's spending limits ([limits] in the config); None means not set."""

    max_price_per_hour: float | None = None
    max_spend_usd: float | None = None
    max_hours: float | None = None

    def lines(self) -> list[tuple[str, str, bool]]:
        """(name, value, set) per limit, for the modal."""

        def money(value: float | None, unit: str) -> str:
            return f"${value:.2f}{unit}" if value is not None else "not set"

        hours = f"{self.max_hours:g} h" if self.max_hours is not None else "not set"
        return [
            ("max $/h", money(self.max_price_per_hour, "/h"), self.max_price_per_hour is not None),
            ("max spend", money(self.max_spend_usd, ""), self.max_spend_usd is not None),
            ("max hours", hours, self.max_hours is not None),
        ]


def offers_table(offers: Sequence[Offer], fits: Sequence[FitVerdict] = ()) -> Table:
    """The fallback order as a table; provider text as plain Text, sanitised."""
    fits = list(fits) or [UNKNOWN] * len(offers)
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    for name, justify in (
        ("#", "right"),
        ("provider", "left"),
        ("offer", "left"),
        ("GPU", "left"),
        ("VRAM", "right"),
        ("fit", "left"),
        ("$/h", "right"),
        ("where", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for position, (offer, fit) in enumerate(zip(offers, fits, strict=True), start=1):
        table.add_row(
            Text(f"{position}"),
            Text(clean_line(offer.provider, 12)),
            Text(clean_line(offer.offer_id, 24)),
            Text(f"{clean_line(offer.gpu_name, 32)} ×{offer.num_gpus}"),
            Text(f"{offer.vram_gib_total:.0f} GB"),
            Text(fit.cell),
            Text(f"{offer.price_per_hour:.3f}" + (" bid" if offer.bid else "")),
            Text(clean_line(offer.location, 32)),
        )
    return table


class LeaseConfirmScreen(DialogScreen[bool]):
    """Returns True to lease, False (Cancel, Esc) not to. Focus starts on Cancel."""

    button_prefix = "lease-"

    def __init__(
        self,
        offers: Sequence[Offer],
        limits: LeaseLimits,
        *,
        provider: str,
        fits: Sequence[FitVerdict] = (),
        need: str = "",
    ) -> None:
        super().__init__(focus="cancel", cancel_value="cancel")
        self.offers = tuple(offers)
        self.fits = tuple(fits) or (UNKNOWN,) * len(self.offers)
        self.need = need  # the model's VRAM need in words
        self.limits = limits
        self.provider = provider

    def dialog_title(self) -> Text:
        count = len(self.offers)
        providers = sorted({offer.provider for offer in self.offers}) or [self.provider]
        where = ", ".join(clean_line(p, 20) for p in providers)
        if count == 1:
            return Text(f"Lease on {where}: 1 offer")
        return Text(f"Lease on {where}: {count} offers, tried in this order")

    def compose_body(self) -> Iterable[Widget]:
        yield Static(offers_table(self.offers, self.fits), id="lease-confirm-offers")
        warning = self.fit_warning()
        if warning:
            yield Static(Text(warning), id="lease-confirm-fit")
        yield Static(self._limits_text(), id="lease-confirm-limits")
        if any(offer.bid for offer in self.offers):
            yield Static(Text(ON_OUTBID), id="lease-confirm-outbid")
        yield Static(Text(ON_FAILURE), id="lease-confirm-failure")

    def choices(self) -> list[Choice]:
        return [Choice("cancel", "Cancel"), Choice("go", "Lease", "warning")]

    def result_for(self, value: str) -> bool:
        return value == "go"

    def fit_warning(self) -> str:
        """What to know before paying for a boot the engine may not survive, or ""."""
        small = [i for i, f in enumerate(self.fits, start=1) if f.fit is Fit.NO]
        tight = [i for i, f in enumerate(self.fits, start=1) if f.fit is Fit.TIGHT]
        parts = []
        if small:
            parts.append(f"offer {_places(small)} cannot hold the model: the engine will "
                         "fail to load it after the boot is paid for")
        if tight:
            parts.append(f"offer {_places(tight)} is tight: no room to spare, it may fail as "
                         "it loads")
        if not parts:
            return ""
        need = f" The model {self.need}." if self.need else ""
        return "⚠ " + "; ".join(parts) + "." + need

    def _limits_text(self) -> Text:
        text = Text("limits  ")
        for index, (name, value, is_set) in enumerate(self.limits.lines()):
            if index:
                text.append(" · ")
            text.append(f"{name} ")
            text.append(value, style="bold" if is_set else "italic")
        if not any(is_set for _, _, is_set in self.limits.lines()):
            text.append("  (no limit set: only the provider's balance stops the spend)")
        return text


def _places(positions: Sequence[int]) -> str:
    return "#" + ", #".join(str(p) for p in positions)
