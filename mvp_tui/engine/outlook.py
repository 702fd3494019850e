"""Per offer, what the board predicts before anything is rented: does the model fit its VRAM
(`model_fit.py`), and how long until it serves (`ready_estimate.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.engine.model_fit import UNKNOWN, FitVerdict, ModelNeed
from mvp_tui.engine.ready_estimate import ReadyEstimate, estimate_ready
from mvp_tui.providers.base import Offer


@dataclass(frozen=True, slots=True)
class OfferOutlook:
    fit: FitVerdict = UNKNOWN
    ready: ReadyEstimate | None = None

    def as_json(self) -> dict[str, object]:
        return {**self.fit.as_json(), "ready": self.ready.as_json() if self.ready else None}


NO_OUTLOOK = OfferOutlook()
Outlook = Callable[[Offer], OfferOutlook]


def no_outlook(offer: Offer) -> OfferOutlook:
    return NO_OUTLOOK


def outlook_for(
    need: ModelNeed | None,
    *,
    image: str,
    image_gb: float,
    has_image: Callable[[Offer, str], bool],
) -> Outlook:
    """The board's per-offer outlook; `need` None (unreadable): fit unknown, and the ready
    estimate counts only the image pull and the engine's start."""

    def outlook(offer: Offer) -> OfferOutlook:
        fit = need.verdict(offer) if need is not None else UNKNOWN
        ready = estimate_ready(
            offer,
            image_gb=image_gb,
            model_bytes=need.model_bytes if need is not None else 0,
            cached_image=has_image(offer, image),
        )
        return OfferOutlook(fit, ready)

    return outlook
