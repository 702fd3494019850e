"""What this user's own runs measured, read from the host journal: decode tok/s per GPU model
(and per host) and the time to a serving node per GPU model (and per host), for the board to
show in place of its predictions.

Figures are medians of the most recent runs (`RECENT`, within `DAYS`), keyed by the model
served (`host_journal.model_key`): another model's speed or download says nothing of this
one's. Speeds are also keyed by the concurrency they were measured at (`level`): an answer
is one stream; `mvp-tui bench` adds its levels (aggregate tok/s of N streams). A host's own
figures win over its GPU model's when it has some (its disk, its link,
its image cache); for the time to ready only when the host ran this image lately (its pull
is then cached, which is what makes its own history the better guess).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mvp_tui.lease.host_journal import (
    DAY_S,
    SERVING,
    HostOutcome,
    SpeedSample,
    host_key,
    hosts_of,
)
from mvp_tui.providers.base import Offer
from mvp_tui.providers.registry import spans_hosts

RECENT = 5  # the newest runs a median is taken over
DAYS = 30.0  # older figures are forgotten (drivers, images and hosts change)


def level(concurrency: int) -> str:
    """A concurrency level as a speed key's last part."""
    return str(max(1, concurrency))


def gpu_key(name: str) -> str:
    """GPU names as providers spell them differ in case and spacing only."""
    return " ".join(name.lower().replace("_", " ").split())


@dataclass(frozen=True, slots=True)
class Figure:
    """A median and how many runs it is of."""

    value: float
    runs: int


def _median(values: list[float]) -> Figure:
    recent = values[-RECENT:]
    return Figure(statistics.median(recent), len(recent))


def _figures(groups: Mapping[tuple[str, ...], list[float]]) -> dict[tuple[str, ...], Figure]:
    return {key: _median(values) for key, values in groups.items() if values}


def _empty() -> Mapping[tuple[str, ...], Figure]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Learned:
    """Medians by (GPU model, model, level) and (provider, host, model, level) for speeds,
    (GPU model, model) and (provider, host, model) for the time to ready."""

    speed_by_gpu: Mapping[tuple[str, ...], Figure] = field(default_factory=_empty)
    speed_by_host: Mapping[tuple[str, ...], Figure] = field(default_factory=_empty)
    ttft_by_gpu: Mapping[tuple[str, ...], Figure] = field(default_factory=_empty)
    ready_by_gpu: Mapping[tuple[str, ...], Figure] = field(default_factory=_empty)
    ready_by_host: Mapping[tuple[str, ...], Figure] = field(default_factory=_empty)
    # (GPU model, model) -> the highest concurrency above 1 a bench measured there
    loaded_by_gpu: Mapping[tuple[str, ...], int] = field(
        default_factory=lambda: MappingProxyType({}))

    def decode(self, offer: Offer, model: str, concurrency: int = 1) -> Figure | None:
        """The measured tok/s for `model` on `offer` at `concurrency` streams (1: one
        answer's decode; N: the aggregate of N): its host's, else its GPU's."""
        return (self.host_decode(offer, model, concurrency)
                or self.gpu_decode(offer.gpu_name, model, concurrency))

    def host_decode(self, offer: Offer, model: str, concurrency: int = 1) -> Figure | None:
        return _on_host(self.speed_by_host, offer, model, level(concurrency))

    def gpu_decode(self, gpu_name: str, model: str, concurrency: int = 1) -> Figure | None:
        return self.speed_by_gpu.get((gpu_key(gpu_name), model, level(concurrency)))

    def gpu_ttft(self, gpu_name: str, model: str, concurrency: int = 1) -> Figure | None:
        return self.ttft_by_gpu.get((gpu_key(gpu_name), model, level(concurrency)))

    def gpu_loaded(self, gpu_name: str, model: str) -> int:
        """The highest concurrency above 1 measured on this GPU model for `model` (0: none)."""
        return self.loaded_by_gpu.get((gpu_key(gpu_name), model), 0)

    def ready(self, offer: Offer, model: str, *, cached_image: bool) -> Figure | None:
        """Create → serving for `model`: the host's own when it ran this image lately, else
        the GPU model's on this provider; None with no history."""
        found = self.host_ready(offer, model) if cached_image else None
        return found or self.gpu_ready(offer.provider, offer.gpu_name, model)

    def host_ready(self, offer: Offer, model: str) -> Figure | None:
        return _on_host(self.ready_by_host, offer, model)

    def gpu_ready(self, provider: str, gpu_name: str, model: str) -> Figure | None:
        return self.ready_by_gpu.get((provider, gpu_key(gpu_name), model))


NOTHING = Learned()


def _on_host(figures: Mapping[tuple[str, ...], Figure], offer: Offer,
             model: str, *tail: str) -> Figure | None:
    """The figure of the host `offer` runs on (a RunPod type: any host it may land on);
    `tail`: the key's parts after the model (a speed's level)."""
    if not figures:
        return None
    if not spans_hosts(offer.provider):  # one host: no tuple of candidates (10,000 offers)
        return figures.get((offer.provider, host_key(offer), model, *tail))
    for host in hosts_of(offer):
        found = figures.get((offer.provider, host, model, *tail))
        if found is not None:
            return found
    return None


def learn(outcomes: Iterable[HostOutcome], speeds: Iterable[SpeedSample], now: float,
          days: float = DAYS) -> Learned:
    """The medians from journal lines (in time order) of the last `days`."""
    cutoff = now - days * DAY_S
    speed_gpu: dict[tuple[str, ...], list[float]] = {}
    speed_host: dict[tuple[str, ...], list[float]] = {}
    ttft_gpu: dict[tuple[str, ...], list[float]] = {}
    loaded: dict[tuple[str, ...], int] = {}
    for s in sorted(speeds, key=lambda s: s.at):
        if s.at < cutoff or s.decode_tok_s <= 0 or not s.model:
            continue
        at = level(s.concurrency)
        gpu = gpu_key(s.gpu_name)
        speed_gpu.setdefault((gpu, s.model, at), []).append(s.decode_tok_s)
        speed_host.setdefault((s.provider, s.host, s.model, at), []).append(s.decode_tok_s)
        if s.ttft_ms > 0:
            ttft_gpu.setdefault((gpu, s.model, at), []).append(s.ttft_ms)
        if s.concurrency > 1:
            loaded[(gpu, s.model)] = max(loaded.get((gpu, s.model), 0), s.concurrency)
    ready_gpu: dict[tuple[str, ...], list[float]] = {}
    ready_host: dict[tuple[str, ...], list[float]] = {}
    for o in sorted(outcomes, key=lambda o: o.at):
        if o.at < cutoff or not o.ok or o.stage != SERVING or not o.model or o.seconds <= 0:
            continue
        ready_gpu.setdefault((o.provider, gpu_key(o.gpu_name), o.model), []).append(o.seconds)
        ready_host.setdefault((o.provider, o.host, o.model), []).append(o.seconds)
    return Learned(
        MappingProxyType(_figures(speed_gpu)), MappingProxyType(_figures(speed_host)),
        MappingProxyType(_figures(ttft_gpu)), MappingProxyType(_figures(ready_gpu)),
        MappingProxyType(_figures(ready_host)), MappingProxyType(loaded),
    )
