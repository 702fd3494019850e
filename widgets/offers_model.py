"""What the Offers pane shows, as pure data: filter, sort, the ordered pick list, row texts.

No Textual here. The pane's virtual table asks for `view()` (every matching offer id, in
order) and for `row(id)` only for the rows it paints, so 10,000 offers cost a sort and a
filter over precomputed keys, not 10,000 formatted rows. Sorting and filtering work on the
offers' raw values; only `row()` formats them. Provider text (GPU name, location) is
sanitised here once, so neither the filter nor the table ever sees an escape sequence.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter

from rich.cells import cell_len

from mvp_tui.engine.model_fit import FitVerdict
from mvp_tui.engine.offer_columns import (
    BID_MARK,
    COLUMNS,
    DROP_ORDER,
    UNKNOWN_TEXT,
    Column,
    SortKey,
)
from mvp_tui.engine.offer_ranking import OfferRanking, offer_key
from mvp_tui.engine.outlook import NO_OUTLOOK, OfferOutlook, Outlook, no_outlook
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

__all__ = ["COLUMNS", "DROP_ORDER", "Column", "SortKey", "offer_key"]  # the board's names

CHEAP_FRACTION = 0.1  # the cheapest tenth by $/GB·h is marked "cheap"
GONE = "gone"  # the pick cell of an offer the provider said is sold
FAILED = "failed"  # the pick cell's badge of an offer whose host failed recently
# The pick cell of an offer its provider refuses to rent (`Offer.refused`: a host that cannot
# start the image or hold the disk): dimmed, listed last, `i` says why; never leased.
REFUSED = "refused"
FAILURE_CHARS = 600
# Why an offer's host is avoided (its recent failure, in words), or None: the host memory
# (lease/host_journal.py), handed in by the app.
FailureText = Callable[[Offer], str | None]
# The columns whose cell is the provider's text (cleaned once per distinct text), those read
# off the offer (sort values and widths from raw figures) and those read off its outlook.
_RAW: tuple[tuple[Column, Callable[[Offer], str], Callable[[Offer], float] | None], ...] = tuple(
    (c, c.spec.raw, c.spec.value) for c in COLUMNS if c.spec.raw is not None
)
_RAW_AT = {column: at for at, (column, _raw, _value) in enumerate(_RAW)}
_OFFER_FIGURES: tuple[tuple[Column, Callable[[Offer], float]], ...] = tuple(
    (c, c.spec.value) for c in COLUMNS if c.spec.value is not None
)
_SEEN_FIGURES: tuple[tuple[Column, Callable[[OfferOutlook], float]], ...] = tuple(
    (c, c.spec.seen) for c in COLUMNS if c.spec.seen is not None
)
# What the filter matches: the provider, the GPU name and the place (in this order).
_FILTERED = (Column.PROVIDER, Column.GPU, Column.WHERE)


@dataclass(frozen=True, slots=True)
class OfferRow:
    """One table row: the offer id (row key), each column's text, and its state flags."""

    key: str
    cells: tuple[str, ...]  # one per `COLUMNS`, already sanitised and formatted
    cheap: bool
    picked: bool
    gone: bool = False  # the provider said it is sold: dimmed until the next refresh
    failed: bool = False  # its host failed recently: badged, sorted after the others
    unfit: bool = False  # the model does not fit its VRAM: dimmed, sorted last
    refused: bool = False  # never rented (`Offer.refused`): dimmed, sorted last, not pickable


# Not frozen: a refresh makes 10,000, and a frozen dataclass sets each field through
# object.__setattr__. Never changed once made.
@dataclass(slots=True)
class _Entry:
    """An offer and where its sanitised provider texts are in `_Entries.cells`."""

    offer: Offer
    at: int


@dataclass(slots=True)
class _Entries:
    """A refresh's offers by row key with their sanitised texts, the filter's text of each,
    and each text column's distinct cells (its width needs no pass over the offers)."""

    by_key: dict[str, _Entry]
    haystacks: dict[str, str]  # key -> lower-cased text the filter matches
    texts: dict[Column, set[str]]
    cells: list[list[str]]  # per `_RAW` column, each offer's cell (by `_Entry.at`)


def _entries(offers: Iterable[Offer]) -> _Entries:
    """Sanitise each offer's provider text once per distinct raw text (a refresh repeats a
    few GPU names, places and stock words), a column at a time (the reads in C); formatting
    waits for `row`."""
    listed = list(offers)
    cells: list[list[str]] = []
    texts: dict[Column, set[str]] = {}
    for column, raw_of, figure_of in _RAW:
        spec = column.spec
        raws = list(map(raw_of, listed))
        if figure_of is None:
            cleaned = {raw: spec.text_of(raw, 0.0) for raw in set(raws)}
            cells.append(list(map(cleaned.__getitem__, raws)))
            texts[column] = set(cleaned.values())
        else:  # its figure where the provider gives no text: once per distinct pair
            pairs = list(zip(raws, map(figure_of, listed), strict=True))
            shown = {pair: spec.text_of(*pair) for pair in set(pairs)}
            cells.append(list(map(shown.__getitem__, pairs)))
            texts[column] = set(shown.values())
    keys = [f"{o.provider}:{o.offer_id}" for o in listed]  # offer_key, inline (10,000 calls)
    by_key = dict(zip(keys, map(_Entry, listed, range(len(listed))), strict=True))
    # The filter's text: once per distinct provider, GPU name and place.
    words = list(zip(*(cells[_RAW_AT[c]] for c in _FILTERED), strict=True))
    joined = {w: " ".join(w).lower() for w in set(words)}
    haystacks = dict(zip(keys, map(joined.__getitem__, words), strict=True))
    return _Entries(by_key, haystacks, texts, cells)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cycle collector held off while a refresh makes ~30,000 small acyclic objects
    (an outlook, its wait and its speed per offer): each 700 allocations would otherwise run
    a collection, and the oldest generation's walks every object the dashboard holds, which
    doubled the ranking's median time (bench/bench_ranking.py). Reference counting still
    frees what dies; the collector runs as usual afterwards."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class OffersModel:
    """Offers by id, a text filter, a sort and the ordered fallback picks."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._haystacks: dict[str, str] = {}  # id -> lower-cased text the filter matches
        self._texts: dict[Column, set[str]] = {}  # a text column's distinct cells
        self._cells: list[list[str]] = []  # each text column's cells, by `_Entry.at`
        self._by_id: list[str] = []  # every id in id order: the sorts' tie order
        self._offers: list[Offer] = []  # the offers, aligned with `_by_id`
        # Each numeric column's raw values, aligned with `_by_id`: the precomputed sort keys.
        self._values: dict[Column, list[float]] = {
            c: [] for c, _figure in (*_OFFER_FIGURES, *_SEEN_FIGURES)
        }
        self._cheap_limit = 0.0
        self.filter_text = ""
        self.sort_key = SortKey.PRICE
        self.ascending = SortKey.PRICE.ascending_first
        self._picks: list[str] = []
        self._gone: set[str] = set()
        self._refused: set[str] = set()  # ids of offers marked `Offer.refused`
        self._failure_text: FailureText = _no_failure
        self._failed: dict[str, str] = {}  # id -> why its host is avoided (cleaned)
        self._outlook_of: Outlook = no_outlook
        self._outlooks: dict[str, OfferOutlook] = {}  # id -> fit and ~ready
        self._fits: list[FitVerdict] = []  # the outlooks' distinct fit verdicts
        self._unfit: set[str] = set()  # ids whose VRAM is too small for the model
        self.show_unfit = True  # [offers] show_unfit: False lists only offers that may fit
        self._view: list[str] | None = None  # cached ordered, filtered ids
        # The last view made and what from: a longer filter in the same sort narrows it.
        self._last: tuple[tuple[SortKey, bool, str], list[str]] | None = None
        self._orders: dict[tuple[SortKey, bool], list[str]] = {}  # every id, per sort
        self._rows: dict[str, OfferRow] = {}  # unpicked rows, made on first paint
        self._widths: tuple[int, ...] | None = None
        # The text and number columns' widths depend on the offers only, not on the outlook:
        # a new outlook (the model's need read, the journal) re-measures no 10,000 offers.
        self._offer_widths: dict[Column, int] = {}

    # -- input ----------------------------------------------------------------------------
    def set_offers(self, offers: Iterable[Offer]) -> None:
        """Replace the offers (a refresh); picks of offers that are gone are dropped."""
        with _collector_paused():  # ~50,000 small acyclic objects: see `_collector_paused`
            self._take_offers(offers)

    def _take_offers(self, offers: Iterable[Offer]) -> None:
        made = _entries(offers)
        self._entries, self._haystacks, self._texts = made.by_key, made.haystacks, made.texts
        self._cells = made.cells
        self._by_id = sorted(self._entries)
        self._offers = [self._entries[key].offer for key in self._by_id]
        self._values = {c: list(map(figure, self._offers)) for c, figure in _OFFER_FIGURES}
        self._set_outlooks()
        self._picks = [key for key in self._picks if key in self._entries]
        self._gone &= set(self._entries)  # still listed after a refresh: still marked
        self._refused = {k for k, e in self._entries.items() if e.offer.refused}
        self._picks = [key for key in self._picks if key not in self._refused]
        per_gib = sorted(filter((0.0).__lt__, self._values[Column.PER_GIB]))  # the > 0, in C
        self._cheap_limit = per_gib[int(len(per_gib) * CHEAP_FRACTION)] if per_gib else 0.0
        self._failed = self._failures()
        self._view = self._last = None
        self._orders = {}
        self._rows = {}
        self._widths = None
        self._offer_widths = {}

    def update_offers(
        self,
        offers: Iterable[Offer],
        *,
        providers: Iterable[str],
        failures: FailureText | None = None,
        outlook: Outlook | None = None,
        show_unfit: bool | None = None,
    ) -> None:
        """A refresh of some providers: their rows are replaced (in place, by key), the
        other providers' rows stay as they are. `failures` and `outlook` (see
        `set_failures`, `set_outlook`), when given, are taken with the offers: one pass over
        the new offers, not one over the old ones first."""
        if failures is not None:
            self._failure_text = failures
        if outlook is not None:
            self._outlook_of = outlook
        if show_unfit is not None:
            self.show_unfit = show_unfit
        refreshed = set(providers)
        kept = [e.offer for e in self._entries.values() if e.offer.provider not in refreshed]
        fresh = list(offers)
        if self._gone:  # listed again by the provider: rentable again
            self._gone -= {offer_key(o) for o in fresh}
        self.set_offers([*kept, *fresh])

    def set_failures(self, failure_text: FailureText) -> None:
        """Which offers' hosts failed recently (the host memory): those rows get a badge and
        sort after the others, whatever the sort; they stay pickable."""
        self._failure_text = failure_text
        self._failed = self._failures()
        self._view = self._last = None
        self._orders = {}
        self._rows = {}
        self._widths = None

    def set_outlook(self, outlook: Outlook, *, show_unfit: bool = True) -> None:
        """Each offer's fit and ~ready (the app's estimate of the model's need): an offer the
        model cannot fit is dimmed and sorted last, or not listed without `show_unfit`."""
        self._outlook_of = outlook
        self.show_unfit = show_unfit
        self._set_outlooks()
        self._view = self._last = None
        self._orders = {}
        self._rows = {}
        self._widths = None

    def _set_outlooks(self) -> None:
        """Each offer's outlook and the sort values it gives; the distinct fit verdicts
        (shared objects: a few, however many offers) for the width."""
        outlook_of = self._outlook_of
        with _collector_paused():
            seen = list(map(outlook_of, self._offers))
        fits = {id(s.fit): s.fit for s in seen}
        self._outlooks = dict(zip(self._by_id, seen, strict=True))
        self._unfit = {key for key, s in zip(self._by_id, seen, strict=True) if s.fit.unfit}
        self._fits = list(fits.values())
        for column, figure in _SEEN_FIGURES:
            self._values[column] = list(map(figure, seen))

    def outlook(self, offer_id: str) -> OfferOutlook:
        return self._outlooks.get(offer_id, NO_OUTLOOK)

    @property
    def unfit_count(self) -> int:
        return len(self._unfit)

    def _failures(self) -> dict[str, str]:
        failure_text = self._failure_text
        if failure_text is _no_failure:
            return {}
        out: dict[str, str] = {}
        for key, entry in self._entries.items():
            text = failure_text(entry.offer)
            if text is not None:
                out[key] = clean_line(text, FAILURE_CHARS)
        return out

    def failure(self, offer_id: str) -> str | None:
        """Why this offer's host is avoided, in full, or None."""
        return self._failed.get(offer_id)

    def mark_gone(self, keys: Iterable[str]) -> None:
        """The provider said these are sold: dimmed, marked, and never walked again."""
        gone = {key for key in keys if key in self._entries}
        self._gone |= gone
        self._picks = [key for key in self._picks if key not in gone]
        for key in gone:
            self._rows.pop(key, None)

    def is_gone(self, key: str) -> bool:
        return key in self._gone

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
        elif (offer_id in self._entries and offer_id not in self._gone
              and offer_id not in self._refused):
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
        """Every offer id that matches the filter, sorted (ties by id: a stable order).

        Each word of the filter must appear in the GPU name or the place. Typing narrows:
        when the filter only grew, the last view is filtered again instead of every offer.
        """
        if self._view is None:
            text = self.filter_text.lower()
            basis = (self.sort_key, self.ascending, text)
            order = self._order()
            if self._last is not None:
                (sort_key, ascending, last_text), last_view = self._last
                if (sort_key, ascending) == basis[:2] and text.startswith(last_text):
                    order = last_view
            haystacks = self._haystacks
            if not self.show_unfit and self._unfit:
                order = [k for k in order if k not in self._unfit]
            for word in text.split():
                order = [k for k in order if word in haystacks[k]]
            self._view = order
            self._last = (basis, order)
        return self._view

    def _order(self) -> list[str]:
        """All ids in the current sort (the one ranking, engine/offer_ranking.py, over the
        precomputed values, ties in id order); kept per sort so cycling back costs nothing."""
        sort = (self.sort_key, self.ascending)
        if sort not in self._orders:
            self._orders[sort] = OfferRanking(*sort).order(
                self._by_id, self._values[self.sort_key.column],
                failed=self._failed, unfit=self._unfit, refused=self._refused,
            )
        return self._orders[sort]

    def row(self, offer_id: str) -> OfferRow:
        """The row's texts and flags (formatted on first use, i.e. when it is painted)."""
        if offer_id in self._picks:
            return self._make_row(offer_id, self._picks.index(offer_id) + 1)
        cached = self._rows.get(offer_id)
        if cached is None:
            cached = self._rows[offer_id] = self._make_row(offer_id, None)
        return cached

    def _make_row(self, offer_id: str, pick: int | None) -> OfferRow:
        entry = self._entries[offer_id]
        offer = entry.offer
        gone = offer_id in self._gone
        failed = offer_id in self._failed
        refused = offer_id in self._refused
        per_gib = offer.price_per_gib_vram_hour
        cheap = 0 < per_gib <= self._cheap_limit and not gone and not refused
        cells = [GONE if gone else REFUSED if refused else _pick_text(pick, failed)]
        outlook = self.outlook(offer_id)
        for column in COLUMNS[1:]:
            at = _RAW_AT.get(column)
            cells.append(self._cells[at][entry.at] if at is not None
                         else column.spec.cell(offer, outlook))
        unfit = offer_id in self._unfit
        return OfferRow(offer_id, tuple(cells), cheap, bool(pick), gone, failed, unfit, refused)

    def widths(self) -> tuple[int, ...]:
        """Each column's width in cells, wide enough for its header and every offer's text.

        Text columns measure their distinct values; numeric ones format only their smallest
        and largest value (a format's width grows with the magnitude), so this stays cheap.
        """
        if self._widths is None:
            self._widths = tuple(max(cell_len(c.value), self._width_of(c)) for c in COLUMNS)
        return self._widths

    def _width_of(self, column: Column) -> int:
        """The widest cell `column` has now."""
        spec = column.spec
        if column is Column.PICK:
            return self._pick_width()
        if column is Column.FIT:  # a few distinct verdicts, however many offers
            return max((cell_len(v.cell) for v in self._fits), default=0)
        if spec.seen is not None:  # the outlook's: measured again with each outlook
            return self._seen_width(column)
        if spec.raw is None and spec.value is None:  # a cell of its own: each one measured
            cells = map(spec.cell, self._offers, map(self.outlook, self._by_id))
            return max(map(cell_len, cells), default=0)
        if column not in self._offer_widths:  # the offers' own: once per set of offers
            self._offer_widths[column] = (
                max(map(cell_len, self._texts.get(column, ())), default=0)
                if spec.raw is not None else self._number_width(column)
            )
        return self._offer_widths[column]

    def _pick_width(self) -> int:
        count = len(self._entries)
        width = max(len(str(count)), len(GONE))
        if self._refused:
            width = max(width, len(REFUSED))
        if self._failed:
            width = max(width, len(_pick_text(count, failed=True)))
        return width

    def _number_width(self, column: Column) -> int:
        values, figure = self._values[column], column.spec.figure
        if not values:
            return 0
        width = max(len(figure(v)) for v in (min(values), max(values)))
        # Any offer priced at our bid (`Offer.bid`), read in C: no property call per offer.
        if column is Column.PRICE and max(map(attrgetter("bid_per_hour"), self._offers)) > 0:
            width = max(width, len(figure(max(values))) + len(BID_MARK))
        return width

    def _seen_width(self, column: Column) -> int:
        """An outlook column's width from its smallest and largest known figure (a format's
        width grows with the magnitude; a speed reads as a prediction, `~`, the wider), and
        `?` when some offer's is unknown: not 10,000 cells formatted to find a width."""
        values, spec = self._values[column], column.spec
        unknown = spec.unknown
        known = values if unknown is None else list(filter(unknown.__ne__, values))  # in C
        texts = [UNKNOWN_TEXT] if len(known) < len(values) else []
        texts += [spec.figure(v) for v in ((min(known), max(known)) if known else ())]
        return max(map(cell_len, texts), default=0)

    def chosen(self, highlighted: str | None, max_attempts: int = 1) -> tuple[Offer, ...]:
        """What Enter leases, in the order it is tried: the picks, or else the highlighted
        offer and the ones after it in the board's current order, up to `max_attempts`.
        Offers marked gone are never walked."""
        keys: Sequence[str] = self._picks
        if not keys and highlighted is not None:
            # Walking on past the highlighted offer never reaches one the model cannot fit;
            # the highlighted one itself is the user's choice (the confirm warns).
            view = [k for k in self.view() if k == highlighted or k not in self._unfit]
            start = view.index(highlighted) if highlighted in view else 0
            keys = [k for k in view[start:] if k not in self._gone and k not in self._refused]
            keys = keys[: max(1, max_attempts)]
        return tuple(self._entries[k].offer for k in keys
                     if k in self._entries and k not in self._refused)

    def subtitle(self, provider: str) -> str:
        """`vastai · 214 match · sort $/h ↑ · filter '4090' · 2 picked` for the border."""
        arrow = "↑" if self.ascending else "↓"
        parts = [provider, f"{len(self.view())} match", f"sort {self.sort_key.value} {arrow}"]
        if self._gone:
            parts.append(f"{len(self._gone)} gone")
        if self._failed:
            parts.append(f"{len(self._failed)} failed host last (i: why)")
        if self._refused:
            parts.append(f"{len(self._refused)} refused (i: why)")
        if self._unfit:
            where = "last" if self.show_unfit else "hidden"
            parts.append(f"{len(self._unfit)} too small {where}")
        if self.filter_text:
            parts.append(f"filter '{clean_line(self.filter_text, 40)}'")
        if self._picks:
            parts.append(f"{len(self._picks)} picked")
        return " · ".join(parts)


def _no_failure(offer: Offer) -> str | None:
    return None


def _pick_text(pick: int | None, failed: bool) -> str:
    """The pick cell: the place in the fallback order, and the badge of a failed host."""
    if failed:
        return f"{pick} {FAILED}" if pick else FAILED
    return f"{pick}" if pick else ""

