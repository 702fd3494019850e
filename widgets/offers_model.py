"""What the Offers pane shows, as pure data: filter, sort, the ordered pick list, row texts.

No Textual here. The pane is a keyed view of this model: it asks for `rows()` (in order, row
key = offer id) and diffs them against what the table shows. Sorting and filtering work on
the offers' raw values; only `rows()` formats them. Provider text (GPU name, location) is
sanitised here once, so neither the filter nor the table ever sees an escape sequence.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

GPU_NAME_CHARS = 40
LOCATION_CHARS = 32
CHEAP_FRACTION = 0.1  # the cheapest tenth by $/GB·h is marked "cheap"
# The table shows the best this many matches: nobody pages through 10,000 machines, and a
# table row costs far more than a model row. The subtitle says when more match.
MAX_ROWS = 200


class SortKey(enum.Enum):
    """What the table is sorted by; `s` cycles through them in this order."""

    PRICE = "$/h"
    PER_GIB = "$/GB"
    VRAM = "VRAM"
    RELIABILITY = "reliability"
    DOWN = "↓Mb/s"

    @property
    def ascending_first(self) -> bool:
        """Cheapest first for prices, biggest/best first for the rest."""
        return self in (SortKey.PRICE, SortKey.PER_GIB)

    def value_of(self, offer: Offer) -> float:
        return _SORT_VALUES[self](offer)

    def next(self) -> SortKey:
        members = list(SortKey)
        return members[(members.index(self) + 1) % len(members)]


_SORT_VALUES: dict[SortKey, Callable[[Offer], float]] = {
    SortKey.PRICE: lambda o: o.price_per_hour,
    SortKey.PER_GIB: lambda o: o.price_per_gib_vram_hour,
    SortKey.VRAM: lambda o: o.vram_gib_total,
    SortKey.RELIABILITY: lambda o: o.reliability,
    SortKey.DOWN: lambda o: o.down_mbps,
}


class Column(enum.Enum):
    """The table's columns, in order; the value is the column key and its header."""

    PICK = "pick"
    GPU = "GPU"
    N = "n"
    VRAM = "VRAM"
    PRICE = "$/h"
    PER_GIB = "$/GB·h"
    RELIABILITY = "rel"
    DOWN = "↓Mb/s"
    UP = "↑Mb/s"
    WHERE = "where"

    @property
    def numeric(self) -> bool:
        return self not in (Column.GPU, Column.WHERE)


COLUMNS: tuple[Column, ...] = tuple(Column)


@dataclass(frozen=True, slots=True)
class OfferRow:
    """One table row: the offer id (row key), each column's text, and its state flags."""

    key: str
    cells: tuple[str, ...]  # one per `COLUMNS`, already sanitised and formatted
    cheap: bool
    picked: bool


@dataclass(frozen=True, slots=True)
class _Entry:
    """An offer with its sanitised, formatted texts, made once per refresh."""

    offer: Offer
    haystack: str  # lower-cased text the filter matches
    cells: tuple[str, ...]  # every column but the pick


def _entry(offer: Offer) -> _Entry:
    """Sanitise and format one offer (once per refresh, not per render)."""
    gpu = clean_line(offer.gpu_name, GPU_NAME_CHARS)
    location = clean_line(offer.location, LOCATION_CHARS)
    cells = (
        gpu,
        f"{offer.num_gpus}",
        f"{offer.vram_gib_total:.0f} GB",
        f"{offer.price_per_hour:.3f}",
        f"{offer.price_per_gib_vram_hour:.4f}",
        f"{offer.reliability:.3f}",
        f"{offer.down_mbps:,.0f}",
        f"{offer.up_mbps:,.0f}",
        location,
    )
    return _Entry(offer, f"{gpu} {location}".lower(), cells)


class OffersModel:
    """Offers by id, a text filter, a sort and the ordered fallback picks."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._cheap_limit = 0.0
        self.filter_text = ""
        self.sort_key = SortKey.PRICE
        self.ascending = SortKey.PRICE.ascending_first
        self._picks: list[str] = []
        self._view: list[str] | None = None  # cached ordered, filtered ids
        self._orders: dict[tuple[SortKey, bool], list[str]] = {}  # every id, per sort
        self._rows: dict[str, OfferRow] = {}  # unpicked rows, made on first use

    # -- input ----------------------------------------------------------------------------
    def set_offers(self, offers: Iterable[Offer]) -> None:
        """Replace the offers (a refresh); picks of offers that are gone are dropped."""
        self._entries = {o.offer_id: _entry(o) for o in offers}
        self._picks = [key for key in self._picks if key in self._entries]
        per_gib = sorted(
            e.offer.price_per_gib_vram_hour
            for e in self._entries.values()
            if e.offer.price_per_gib_vram_hour > 0
        )
        self._cheap_limit = per_gib[int(len(per_gib) * CHEAP_FRACTION)] if per_gib else 0.0
        self._view = None
        self._orders = {}
        self._rows = {}

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._view = None

    def cycle_sort(self) -> None:
        """Next sort key, in that key's natural direction."""
        self.sort_key = self.sort_key.next()
        self.ascending = self.sort_key.ascending_first
        self._view = None

    def reverse_sort(self) -> None:
        self.ascending = not self.ascending
        self._view = None

    def toggle_pick(self, offer_id: str) -> None:
        """Add the offer at the end of the fallback list, or take it out."""
        if offer_id in self._picks:
            self._picks.remove(offer_id)
        elif offer_id in self._entries:
            self._picks.append(offer_id)

    # -- output ---------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return len(self._entries)

    @property
    def picks(self) -> tuple[str, ...]:
        return tuple(self._picks)

    def offer(self, offer_id: str) -> Offer | None:
        entry = self._entries.get(offer_id)
        return entry.offer if entry else None

    def view(self) -> list[str]:
        """Every offer id that matches the filter, sorted (ties by id: a stable order)."""
        if self._view is None:
            order = self._order()
            words = self.filter_text.lower().split()
            if words:
                entries = self._entries
                order = [k for k in order if all(w in entries[k].haystack for w in words)]
            self._view = order
        return self._view

    def _order(self) -> list[str]:
        """All ids in the current sort; kept per sort so cycling back costs nothing."""
        sort = (self.sort_key, self.ascending)
        if sort not in self._orders:
            value = _SORT_VALUES[self.sort_key]
            sign = 1.0 if self.ascending else -1.0
            self._orders[sort] = sorted(
                self._entries, key=lambda k: (sign * value(self._entries[k].offer), k)
            )
        return self._orders[sort]

    def rows(self) -> list[OfferRow]:
        """The rows the table shows, in order: the first `MAX_ROWS` of the view."""
        row = self.row
        return [row(key) for key in self.view()[:MAX_ROWS]]

    def row(self, offer_id: str) -> OfferRow:
        if offer_id in self._picks:
            return self._make_row(offer_id, self._picks.index(offer_id) + 1)
        cached = self._rows.get(offer_id)
        if cached is None:
            cached = self._rows[offer_id] = self._make_row(offer_id, None)
        return cached

    def _make_row(self, offer_id: str, pick: int | None) -> OfferRow:
        entry = self._entries[offer_id]
        per_gib = entry.offer.price_per_gib_vram_hour
        cheap = 0 < per_gib <= self._cheap_limit
        return OfferRow(offer_id, (f"{pick}" if pick else "", *entry.cells), cheap, bool(pick))

    def chosen(self, highlighted: str | None) -> tuple[Offer, ...]:
        """What Enter leases: the picks in order, or else the highlighted offer."""
        keys: Sequence[str] = self._picks or ([highlighted] if highlighted else [])
        return tuple(self._entries[k].offer for k in keys if k in self._entries)

    def subtitle(self, provider: str) -> str:
        """`vastai · 214 match · sort $/h ↑ · filter '4090' · 2 picked` for the border."""
        arrow = "↑" if self.ascending else "↓"
        matches = len(self.view())
        shown = f" (best {MAX_ROWS})" if matches > MAX_ROWS else ""
        parts = [provider, f"{matches} match{shown}", f"sort {self.sort_key.value} {arrow}"]
        if self.filter_text:
            parts.append(f"filter '{clean_line(self.filter_text, 40)}'")
        if self._picks:
            parts.append(f"{len(self._picks)} picked")
        return " · ".join(parts)
