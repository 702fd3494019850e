"""The one order of offers: the board's (widgets/offers_model.py), the offers `up --headless`
walks (engine/headless.py) and `mvp-tui offers` (commands/offers.py) all come from here.

An order is a column's figure (`SortKey`; by default `$/h` all-in, cheapest first), ties by
row key (`offer_key`, a stable order), and then, whatever the sort, three groups moved last
in this order: offers on a host that failed recently (the host memory), offers the model
cannot fit, and offers the provider refuses to rent (`Offer.refused`). No Textual here.

The providers may still ask their APIs for a sorted answer (Vast's `order`, RunPod's catalog
walk): that decides which offers a search returns, not the order anyone sees or walks. Once
a walk runs, only RunPod re-sorts what is left, after a type proved unplaceable, from its
catalog read again (lease/walk.py `_reorder`): stock facts this order does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from mvp_tui.config import Config
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.offer_columns import SortKey
from mvp_tui.engine.outlook import Outlook, no_outlook, outlook_for
from mvp_tui.lease.host_journal import HostMemory, config_model_key
from mvp_tui.providers.base import Offer

K = TypeVar("K")
# Whether an offer's host failed recently (the host memory: `HostMemory.avoids`).
Failed = Callable[[Offer], bool]


def offer_key(offer: Offer) -> str:
    """An offer's row key: offer ids are only unique within one provider."""
    return f"{offer.provider}:{offer.offer_id}"


def _never(_offer: Offer) -> bool:
    return False


def last(order: list[K], moved: Collection[K]) -> list[K]:
    """`order` with the keys in `moved` after the others; both keep their order."""
    if not moved:
        return order
    return [k for k in order if k not in moved] + [k for k in order if k in moved]


@dataclass(frozen=True, slots=True)
class OfferRanking:
    """A sort (`key`, `ascending`: None is the key's own first direction) and the groups
    every sort puts last."""

    key: SortKey = SortKey.PRICE
    ascending: bool | None = None

    @property
    def up(self) -> bool:
        return self.key.ascending_first if self.ascending is None else self.ascending

    def order(
        self,
        keys: Sequence[K],
        figures: Sequence[float],
        *,
        failed: Collection[K] = (),
        unfit: Collection[K] = (),
        refused: Collection[K] = (),
    ) -> list[K]:
        """`keys` (in tie order) by their `figures` (aligned with them, the key column's),
        then the failed hosts, the unfit and the refused last, in that order. A stable sort
        of positions: ties keep `keys`' order in both directions (`reverse=True` keeps
        sort stability)."""
        positions = sorted(range(len(figures)), key=figures.__getitem__, reverse=not self.up)
        order = list(map(keys.__getitem__, positions))
        order = last(order, failed)
        order = last(order, unfit)  # after even a failed host: the model cannot load there
        return last(order, refused)  # last of all: never rented, whatever it costs

    def rank(
        self, offers: Iterable[Offer], *, failed: Failed = _never, outlook: Outlook = no_outlook
    ) -> list[Offer]:
        """`offers` in this order: as the board lists them with the same host memory
        (`failed`) and the same fit (`outlook`)."""
        listed = sorted(offers, key=offer_key)  # the board's tie order: by row key
        seen = [outlook(o) for o in listed]
        spec = self.key.column.spec
        at = range(len(listed))
        ordered = self.order(
            at,
            [spec.figure_of(o, s) for o, s in zip(listed, seen, strict=True)],
            failed={i for i in at if failed(listed[i])},
            unfit={i for i in at if seen[i].fit.unfit},
            refused={i for i in at if listed[i].refused},
        )
        return [listed[i] for i in ordered]


BEST_FIRST = OfferRanking()  # the board's first order, and the walk's without picks


def outlook_of(config: Config, need: ModelNeed | None, memory: HostMemory) -> Outlook:
    """Each offer's fit, ~ready and decode speed as the board sees them (tui/offer_board.py),
    for a ranking outside it: the model's need (None: fit unknown), the image and the host
    journal's figures."""
    return outlook_for(need, image=config.node_image()[0], image_gb=config.settings.image.size_gb,
                       has_image=memory.has_image, learned=memory.learned,
                       model=config_model_key(config),
                       concurrency=config.settings.prompt.concurrency)
