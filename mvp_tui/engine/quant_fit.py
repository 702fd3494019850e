"""Which of a repo's quants each offer can hold: the largest whose weights, KV cache at the
run's context and margin fit (the board's `fit` rule, `model_fit.py`), per kind of offer.

Pure numbers. The quants of one repo share the model's shape (layers, KV heads), so one
GGUF header gives every quant's KV cache; only the weights' size differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mvp_tui.engine.gguf_quants import QuantModel
from mvp_tui.engine.gguf_shape import GgufShape
from mvp_tui.engine.model_fit import Fit, ModelNeed, need_from
from mvp_tui.providers.base import Offer


@dataclass(frozen=True, slots=True)
class QuantNeed:
    quant: QuantModel
    need: ModelNeed


@dataclass(frozen=True, slots=True)
class OfferFit:
    """A kind of offer (provider, GPU, count, memory) and the largest quant it holds."""

    offer: Offer  # the cheapest of its kind
    count: int  # offers of this kind on the board
    best: QuantModel | None  # None: no quant fits
    smallest_gb: int  # what the smallest quant needs per node, for "none fits"

    @property
    def cell(self) -> str:
        """`Q5_K_M`, or `none (needs 5 GB)`."""
        if self.best is not None:
            return self.best.label
        return f"none (needs {self.smallest_gb} GB)" if self.smallest_gb else "none"


def quant_needs(
    quants: Sequence[QuantModel], shape: GgufShape, *, context: int | None, nodes: int,
    slots: int = 1,
) -> list[QuantNeed]:
    """Each quant's need at `context` (None: the engine's default, capped by the model's) in
    each of `slots` slots."""
    return [QuantNeed(q, need_from(shape, q.size, context=context, nodes=nodes, slots=slots))
            for q in quants]


def _kind(offer: Offer) -> tuple[str, str, int, int, int]:
    memory = offer.ram_mib if offer.gpu_ram_mib <= 0 else 0  # a CPU node serves from RAM
    return (offer.provider, offer.gpu_name, offer.num_gpus, offer.gpu_ram_mib, memory)


def best_quants(offers: Iterable[Offer], needs: Sequence[QuantNeed]) -> list[OfferFit]:
    """Per kind of offer, in the order the kinds first appear: the largest quant that fits
    with its margin (`Fit.FITS`; a tight fit may fail as it loads, so it does not count) and
    that `[model]` can serve (a split one cannot yet: `QuantModel.unservable`)."""
    kinds: dict[tuple[str, str, int, int, int], list[Offer]] = {}
    for offer in offers:
        kinds.setdefault(_kind(offer), []).append(offer)
    servable = [n for n in needs if not n.quant.unservable()]
    largest_first = sorted(servable, key=lambda n: n.quant.size, reverse=True)
    smallest_gb = min((n.need.per_node_gb for n in servable), default=0)
    fits: list[OfferFit] = []
    for group in kinds.values():
        cheapest = min(group, key=lambda o: (o.price_per_hour, o.offer_id))
        best = next(
            (n.quant for n in largest_first
             if n.need.verdict(cheapest).fit is Fit.FITS),
            None,
        )
        fits.append(OfferFit(cheapest, len(group), best, smallest_gb))
    return fits


@dataclass(frozen=True, slots=True)
class RepoFit:
    """A repo's quants with their needs (when its shape was read) and the board's offers,
    each with the largest quant it holds: what the model picker shows."""

    repo: str
    quants: tuple[QuantModel, ...]
    needs: tuple[QuantNeed, ...] = ()  # empty: the shape is unknown (`note` says why)
    offers: tuple[OfferFit, ...] = ()
    note: str = ""

    def need_of(self, quant: QuantModel) -> ModelNeed | None:
        return next((n.need for n in self.needs if n.quant == quant), None)

    @property
    def context(self) -> int:
        return self.needs[0].need.context if self.needs else 0

    def holders(self, quant: QuantModel) -> int:
        """How many of the board's kinds of offer hold `quant` with its margin."""
        need = self.need_of(quant)
        if need is None:
            return 0
        return sum(1 for o in self.offers if need.verdict(o.offer).fit is Fit.FITS)


def repo_fit(
    repo: str,
    quants: Sequence[QuantModel],
    shape: GgufShape | None,
    offers: Iterable[Offer],
    *,
    context: int | None,
    nodes: int,
    note: str = "",
    slots: int = 1,
) -> RepoFit:
    """The picker's view of `repo` against `offers` (None shape: sizes only)."""
    if shape is None:
        return RepoFit(repo, tuple(quants), note=note)
    needs = quant_needs(quants, shape, context=context, nodes=nodes, slots=slots)
    return RepoFit(repo, tuple(quants), tuple(needs), tuple(best_quants(offers, needs)), note)
