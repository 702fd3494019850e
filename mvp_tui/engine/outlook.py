"""Per offer, what the board predicts before anything is rented: does the model fit its VRAM
(`model_fit.py`), how long until it serves (`ready_estimate.py`), and how fast it decodes and
what a million tokens cost there (`decode_speed.py`); measured figures from this user's own
runs (lease/learned.py) replace the predictions where there are some."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.engine.decode_speed import DecodeSpeed, measured, predicted
from mvp_tui.engine.model_fit import UNKNOWN, FitVerdict, ModelNeed
from mvp_tui.engine.ready_estimate import ReadyEstimate, estimate_ready, learned_ready
from mvp_tui.lease.learned import NOTHING, Learned
from mvp_tui.providers.base import Offer


@dataclass(frozen=True, slots=True)
class OfferOutlook:
    fit: FitVerdict = UNKNOWN
    ready: ReadyEstimate | None = None
    speed: DecodeSpeed | None = None

    def as_json(self) -> dict[str, object]:
        speed = self.speed.as_json() if self.speed is not None else {
            "tok_per_s": None, "usd_per_mtok": None, "measured": False, "measured_runs": 0}
        return {**self.fit.as_json(), "ready": self.ready.as_json() if self.ready else None,
                **speed}


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
    learned: Learned | None = None,
    model: str = "",
) -> Outlook:
    """The board's per-offer outlook; `need` None (unreadable): fit unknown, the ready
    estimate counts only the image pull and the engine's start, and the speed is known only
    where this user measured it. `model` is the learned figures' key (`model_key`)."""
    history = learned if learned is not None else NOTHING
    per_token = need.model_bytes + need.kv_bytes if need is not None else 0

    def outlook(offer: Offer) -> OfferOutlook:
        fit = need.verdict(offer) if need is not None else UNKNOWN
        cached = has_image(offer, image)
        ran = history.ready(offer, model, cached_image=cached) if model else None
        ready = (
            learned_ready(ran.value, ran.runs, cached_image=cached) if ran is not None
            else estimate_ready(offer, image_gb=image_gb,
                                model_bytes=need.model_bytes if need is not None else 0,
                                cached_image=cached)
        )
        rate = history.decode(offer, model) if model else None
        speed = measured(offer, rate.value, rate.runs) if rate is not None else (
            predicted(offer, per_token))
        return OfferOutlook(fit, ready, speed)

    return outlook
