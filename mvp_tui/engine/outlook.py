"""Per offer, what the board predicts before anything is rented: does the model fit its VRAM
(`model_fit.py`), how long until it serves (`ready_estimate.py`), and how fast it decodes and
what a million tokens cost there (`decode_speed.py`); measured figures from this user's own
runs (lease/learned.py) replace the predictions where there are some.

Ten thousand offers share a few GPU models and card shapes: what depends only on those (the
fit, the class's efficiency, the learned medians of a GPU model) is worked out once per
distinct value, so a refresh costs a few dictionary reads per offer (bench/bench_ranking.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.engine.decode_speed import USD_PER_MTOK_FACTOR as FACTOR
from mvp_tui.engine.decode_speed import DecodeSpeed, predict_tok_per_s
from mvp_tui.engine.model_fit import UNKNOWN, FitVerdict, ModelNeed
from mvp_tui.engine.ready_estimate import ReadyEstimate, learned_ready, ready_formula
from mvp_tui.lease.learned import NOTHING, Figure, Learned
from mvp_tui.providers.base import Offer


# Not frozen: the board makes one per offer (10,000 a refresh), and a frozen dataclass sets
# each field through object.__setattr__, five times slower. Never changed once made.
@dataclass(slots=True)
class OfferOutlook:
    fit: FitVerdict = UNKNOWN
    ready: ReadyEstimate | None = None
    speed: DecodeSpeed | None = None

    def as_json(self) -> dict[str, object]:
        speed = self.speed.as_json() if self.speed is not None else {
            "tok_per_s": None, "usd_per_mtok": None, "measured": False, "measured_runs": 0,
            "ttft_ms": None, "concurrency": None, "one_stream": None, "loaded": None}
        return {**self.fit.as_json(), "ready": self.ready.as_json() if self.ready else None,
                **speed}


NO_OUTLOOK = OfferOutlook()


def _guess_at(one: DecodeSpeed, concurrency: int) -> DecodeSpeed:
    """The one-stream figure standing in at `concurrency` streams: not measured there, so
    marked `~` (N streams give at least one's aggregate on llama-server's parallel slots)."""
    return dataclasses.replace(one, measured=False, concurrency=concurrency, one_stream=one)
# Per GPU model, bandwidth and card shape: the fit, the predicted tok/s, and the GPU model's
# learned decode, ready and TTFT medians.
_Group = tuple[FitVerdict, float | None, Figure | None, Figure | None, Figure | None]
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
    concurrency: int = 1,
) -> Outlook:
    """The board's per-offer outlook; `need` None (unreadable): fit unknown, the ready
    estimate counts only the image pull and the engine's start, and the speed is known only
    where this user measured it. `model` is the learned figures' key (`model_key`).

    `concurrency` ([prompt] concurrency): the streams the board's tok/s and $/Mtok are for.
    Above 1, the figure `mvp-tui bench` measured at that level (the aggregate of N streams),
    else the one-stream figure marked `~` (not measured at that load)."""
    history = learned if learned is not None else NOTHING
    if not model:
        history = NOTHING
    per_token = need.model_bytes + need.kv_bytes if need is not None else 0
    formula = ready_formula(image_gb, need.model_bytes if need is not None else 0)
    by_host = bool(history.speed_by_host or history.ready_by_host)
    learning = bool(history.speed_by_gpu or history.ready_by_gpu or by_host)
    loading = bool(history.loaded_by_gpu) or concurrency > 1
    # What depends only on the GPU model, its bandwidth and the card shape: once per distinct
    # value.
    groups: dict[tuple[str, str, float, int, int, int], _Group] = {}

    def group_of(offer: Offer) -> _Group:
        fit = need.verdict(offer) if need is not None else UNKNOWN
        rate = predict_tok_per_s(offer, per_token)
        if not learning:
            return fit, rate, None, None, None
        return (fit, rate, history.gpu_decode(offer.gpu_name, model),
                history.gpu_ready(offer.provider, offer.gpu_name, model),
                history.gpu_ttft(offer.gpu_name, model))

    # A learned wait is the same figure for every offer of a GPU model (or host): one
    # estimate each, shared (never changed once made).
    waits: dict[tuple[int, bool], ReadyEstimate] = {}

    def learned_wait(ran: Figure, cached: bool) -> ReadyEstimate:
        key = (id(ran), cached)
        wait = waits.get(key)
        if wait is None:
            wait = waits[key] = learned_ready(ran.value, ran.runs, cached_image=cached)
        return wait

    def outlook(offer: Offer) -> OfferOutlook:
        key = (offer.provider, offer.gpu_name, offer.mem_bw_gbps, offer.num_gpus,
               offer.gpu_ram_mib, offer.ram_mib)
        group = groups.get(key)
        if group is None:
            group = groups[key] = group_of(offer)
        fit, predicted, decode, ran, ttft = group
        cached = has_image(offer, image)
        if by_host:
            decode = history.host_decode(offer, model) or decode
            if cached:
                ran = history.host_ready(offer, model) or ran
        ready = learned_wait(ran, cached) if ran is not None else formula(offer.down_mbps, cached)
        price = offer.price_per_hour
        speed: DecodeSpeed | None = None
        if decode is not None:
            rate = decode.value
            speed = DecodeSpeed(rate, FACTOR * price / rate if rate > 0 <= price else None,
                                True, decode.runs, ttft.value if ttft is not None else None)
        elif predicted is not None:
            speed = DecodeSpeed(predicted, FACTOR * price / predicted if price >= 0 else None,
                                False)
        if loading and learning:
            speed = under_load(offer, speed)
        elif speed is not None and concurrency > 1:  # nothing measured: one stream, a guess
            speed = _guess_at(speed, concurrency)
        return OfferOutlook(fit, ready, speed)

    def measured_at(offer: Offer, streams: int) -> DecodeSpeed | None:
        found = history.decode(offer, model, streams)
        if found is None or found.value <= 0:
            return None
        price = offer.price_per_hour
        ttft = history.gpu_ttft(offer.gpu_name, model, streams)
        return DecodeSpeed(found.value, FACTOR * price / found.value if price >= 0 else None,
                           True, found.runs, ttft.value if ttft is not None else None,
                           concurrency=streams)

    def under_load(offer: Offer, one: DecodeSpeed | None) -> DecodeSpeed | None:
        """The figure at `concurrency`, carrying the one-stream one and the loaded one."""
        top = concurrency if concurrency > 1 else history.gpu_loaded(offer.gpu_name, model)
        loaded = measured_at(offer, top) if top > 1 else None
        if concurrency == 1:
            if one is None or loaded is None:
                return one
            return dataclasses.replace(one, loaded=loaded)
        if loaded is not None:
            return dataclasses.replace(loaded, one_stream=one, loaded=loaded)
        return _guess_at(one, concurrency) if one is not None else None

    return outlook
