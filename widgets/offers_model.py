"""What the Offers pane shows, as pure data: filter, sort, the ordered pick list, row texts.

No Textual here. The pane's virtual table asks for `view()` (every matching offer id, in
order) and for `row(id)` only for the rows it paints, so 10,000 offers cost a sort and a
filter over precomputed keys, not 10,000 formatted rows. Sorting and filtering work on the
offers' raw values; only `row()` formats them. Provider text (GPU name, location) is
sanitised here once, so neither the filter nor the table ever sees an escape sequence.
"""

from __future__ import annotations

import contextlib
import enum
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter

from rich.cells import cell_len

from mvp_tui.engine.decode_speed import DecodeSpeed
from mvp_tui.engine.model_fit import FitVerdict
from mvp_tui.engine.outlook import NO_OUTLOOK, OfferOutlook, Outlook, no_outlook
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

GPU_NAME_CHARS = 40
LOCATION_CHARS = 32
CHEAP_FRACTION = 0.1  # the cheapest tenth by $/GB·h is marked "cheap"


class SortKey(enum.Enum):
    """What the table is sorted by; `s` cycles through them in this order."""

    PRICE = "$/h"
    PER_GIB = "$/GB"
    VRAM = "VRAM"
    RELIABILITY = "reliability"
    DOWN = "↓Mb/s"
    READY = "~ready"
    PER_MTOK = "$/Mtok"

    @property
    def ascending_first(self) -> bool:
        """Cheapest and soonest first for prices and waits, biggest/best first for the rest."""
        return self in (SortKey.PRICE, SortKey.PER_GIB, SortKey.READY, SortKey.PER_MTOK)

    @property
    def column(self) -> Column:
        """The column whose raw values this sort orders by."""
        return _SORT_COLUMNS[self]

    def next(self) -> SortKey:
        members = list(SortKey)
        return members[(members.index(self) + 1) % len(members)]


class Column(enum.Enum):
    """The table's columns, in order; the value is the column key and its header."""

    PICK = "pick"
    PROVIDER = "provider"
    GPU = "GPU"
    N = "n"
    VRAM = "VRAM"
    FIT = "fit"
    PRICE = "$/h"
    TOKS = "tok/s"
    PER_MTOK = "$/Mtok"
    READY = "~ready"
    PER_GIB = "$/GB·h"
    RELIABILITY = "stock/rel"
    DOWN = "↓Mb/s"
    UP = "↑Mb/s"
    WHERE = "where"

    @property
    def numeric(self) -> bool:
        return self not in TEXT_COLUMNS


COLUMNS: tuple[Column, ...] = tuple(Column)
# Columns of text (provider names, places, stock words), measured rather than formatted.
TEXT_COLUMNS = frozenset({Column.PROVIDER, Column.GPU, Column.WHERE, Column.FIT})
# What a narrow board drops first, in this order; `$/h`, `fit`, `$/Mtok` and `~ready` always
# stay.
DROP_ORDER: tuple[Column, ...] = (
    Column.UP, Column.PER_GIB, Column.RELIABILITY, Column.DOWN, Column.N, Column.WHERE,
    Column.PROVIDER, Column.TOKS, Column.VRAM,
)
# Columns whose cells come from the outlook (the model's fit, speed and wait), not the offer.
OUTLOOK_COLUMNS = frozenset({Column.FIT, Column.TOKS, Column.PER_MTOK, Column.READY})
UNKNOWN_READY = float("inf")  # an offer with no bandwidth: its wait sorts last
UNKNOWN_COST = float("inf")  # an offer whose decode speed is unknown: its $/Mtok sorts last
BID_MARK = " bid"  # after the $/h of a Vast interruptible offer: the price is our bid
GONE = "gone"  # the pick cell of an offer the provider said is sold
FAILED = "failed"  # the pick cell's badge of an offer whose host failed recently
# The pick cell of an offer its provider refuses to rent (`Offer.refused`: a host that cannot
# start the image or hold the disk): dimmed, listed last, `i` says why; never leased.
REFUSED = "refused"
FAILURE_CHARS = 600
# Why an offer's host is avoided (its recent failure, in words), or None: the host memory
# (lease/host_journal.py), handed in by the app.
FailureText = Callable[[Offer], str | None]


def offer_key(offer: Offer) -> str:
    """The board's row key: offer ids are only unique within one provider."""
    return f"{offer.provider}:{offer.offer_id}"


_SORT_COLUMNS: dict[SortKey, Column] = {
    SortKey.PRICE: Column.PRICE,
    SortKey.PER_GIB: Column.PER_GIB,
    SortKey.VRAM: Column.VRAM,
    SortKey.RELIABILITY: Column.RELIABILITY,
    SortKey.DOWN: Column.DOWN,
    SortKey.READY: Column.READY,
    SortKey.PER_MTOK: Column.PER_MTOK,
}


@dataclass(frozen=True, slots=True)
class NumberFormat:
    """How a numeric column reads its raw value and formats it (one place for both)."""

    value: Callable[[Offer], float]
    spec: str  # a `str.format` template

    def text(self, offer: Offer) -> str:
        return self.spec.format(self.value(offer))

    def format(self, value: float) -> str:
        return self.spec.format(value)


# The raw values by attrgetter (read in C: a refresh reads seven of them from 10,000 offers).
_NUMBERS: dict[Column, NumberFormat] = {
    Column.N: NumberFormat(attrgetter("num_gpus"), "{}"),
    Column.VRAM: NumberFormat(attrgetter("vram_gib_total"), "{:.0f} GB"),
    Column.PRICE: NumberFormat(attrgetter("all_in_per_hour"), "{:.3f}"),  # the image pull in
    Column.PER_GIB: NumberFormat(attrgetter("price_per_gib_vram_hour"), "{:.4f}"),
    Column.RELIABILITY: NumberFormat(attrgetter("reliability"), "{:.3f}"),
    Column.DOWN: NumberFormat(attrgetter("down_mbps"), "{:,.0f}"),
    Column.UP: NumberFormat(attrgetter("up_mbps"), "{:,.0f}"),
}


def _ready_text(value: float) -> str:
    return "?" if value == UNKNOWN_READY else clock_text(value)


def _ready_value(outlook: OfferOutlook) -> float:
    return outlook.ready.total_s if outlook.ready is not None else UNKNOWN_READY


def _outlook_text(outlook: OfferOutlook, column: Column) -> str:
    """The cell of an outlook column: `✓`, `~112`, `~0.65`, `3:52`, or `?` when unknown."""
    if column is Column.FIT:
        return outlook.fit.cell
    if column is Column.READY:
        return _ready_text(_ready_value(outlook))
    speed = outlook.speed
    if speed is None:
        return "?"
    return speed.tok_cell if column is Column.TOKS else speed.mtok_cell


def _price_text(offer: Offer) -> str:
    text = _NUMBERS[Column.PRICE].text(offer)
    return text + BID_MARK if offer.bid else text


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
    """An offer with its sanitised provider texts."""

    offer: Offer
    gpu: str
    location: str
    provider: str
    stock: str  # the provider's stock hint, else its reliability


@dataclass(slots=True)
class _Entries:
    """A refresh's offers by row key with their sanitised texts, the filter's text of each,
    and each text column's distinct cells (its width needs no pass over the offers)."""

    by_key: dict[str, _Entry]
    haystacks: dict[str, str]  # key -> lower-cased text the filter matches
    texts: dict[Column, set[str]]


def _entries(offers: Iterable[Offer]) -> _Entries:
    """Sanitise each offer's provider text once per distinct raw text (a refresh repeats a
    few GPU names, places and stock words); formatting waits for `row`."""
    gpus: dict[str, str] = {}
    places: dict[str, str] = {}
    providers: dict[str, str] = {}
    stocks: dict[tuple[str, float], str] = {}
    haystack_of: dict[tuple[str, str, str], str] = {}
    by_key: dict[str, _Entry] = {}
    haystacks: dict[str, str] = {}
    for offer in offers:
        raw_gpu, raw_place, raw_provider = offer.gpu_name, offer.location, offer.provider
        gpu = gpus.get(raw_gpu)
        if gpu is None:
            gpu = gpus[raw_gpu] = clean_line(raw_gpu, GPU_NAME_CHARS)
        location = places.get(raw_place)
        if location is None:
            location = places[raw_place] = clean_line(raw_place, LOCATION_CHARS)
        provider = providers.get(raw_provider)
        if provider is None:
            provider = providers[raw_provider] = clean_line(raw_provider, 12)
        hint = (offer.stock, offer.reliability)
        stock = stocks.get(hint)
        if stock is None:
            stock = stocks[hint] = (
                clean_line(offer.stock, 8) if offer.stock else f"{offer.reliability:.3f}"
            )
        key = f"{raw_provider}:{offer.offer_id}"  # offer_key, inline (10,000 calls)
        by_key[key] = _Entry(offer, gpu, location, provider, stock)
        words = (provider, gpu, location)
        haystack = haystack_of.get(words)
        if haystack is None:
            haystack = haystack_of[words] = f"{provider} {gpu} {location}".lower()
        haystacks[key] = haystack
    texts = {
        Column.GPU: set(gpus.values()),
        Column.WHERE: set(places.values()),
        Column.PROVIDER: set(providers.values()),
        Column.RELIABILITY: set(stocks.values()),
    }
    return _Entries(by_key, haystacks, texts)


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
        self._by_id: list[str] = []  # every id in id order: the sorts' tie order
        self._offers: list[Offer] = []  # the offers, aligned with `_by_id`
        # Each numeric column's raw values, aligned with `_by_id`: the precomputed sort keys.
        self._values: dict[Column, list[float]] = {
            c: [] for c in (*_NUMBERS, Column.READY, Column.PER_MTOK, Column.TOKS)
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
        self._by_id = sorted(self._entries)
        self._offers = [self._entries[key].offer for key in self._by_id]
        self._values = {c: list(map(f.value, self._offers)) for c, f in _NUMBERS.items()}
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
        """Each offer's outlook and the sort values it gives, in one pass over the ids; the
        distinct fit verdicts (shared objects: a few, however many offers) for the width."""
        outlook_of = self._outlook_of
        outlooks: dict[str, OfferOutlook] = {}
        ready: list[float] = []
        mtok: list[float] = []
        toks: list[float] = []
        unfit: set[str] = set()
        fits: dict[int, FitVerdict] = {}
        with _collector_paused():
            for key, offer in zip(self._by_id, self._offers, strict=True):
                seen = outlooks[key] = outlook_of(offer)
                fit = seen.fit
                fits[id(fit)] = fit
                wait, speed = seen.ready, seen.speed
                ready.append(wait.total_s if wait is not None else UNKNOWN_READY)
                if speed is None:
                    mtok.append(UNKNOWN_COST)
                    toks.append(0.0)
                else:
                    cost = speed.usd_per_mtok
                    mtok.append(cost if cost is not None else UNKNOWN_COST)
                    toks.append(speed.tok_per_s)
                if fit.unfit:
                    unfit.add(key)
        self._outlooks = outlooks
        self._unfit = unfit
        self._fits = list(fits.values())
        self._values[Column.READY] = ready
        self._values[Column.PER_MTOK] = mtok
        self._values[Column.TOKS] = toks

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
        """All ids in the current sort; kept per sort so cycling back costs nothing.

        A stable sort of positions in the id-ordered list by the precomputed values: ties
        keep id order in both directions (`reverse=True` keeps sort stability). Offers on a
        recently failed host follow the others, in the same sort.
        """
        sort = (self.sort_key, self.ascending)
        if sort not in self._orders:
            values = self._values[self.sort_key.column]
            positions = sorted(
                range(len(values)), key=values.__getitem__, reverse=not self.ascending
            )
            order = list(map(self._by_id.__getitem__, positions))
            if self._failed:
                failed = self._failed
                order = [k for k in order if k not in failed] + [k for k in order if k in failed]
            if self._unfit:  # after even a failed host: the model cannot load there at all
                unfit = self._unfit
                order = [k for k in order if k not in unfit] + [k for k in order if k in unfit]
            if self._refused:  # last of all: it is never rented, whatever it costs
                no = self._refused
                order = [k for k in order if k not in no] + [k for k in order if k in no]
            self._orders[sort] = order
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
            if column in OUTLOOK_COLUMNS:
                cells.append(_outlook_text(outlook, column))
            elif column is Column.PRICE:
                cells.append(_price_text(offer))
            elif column in TEXT_COLUMNS or column is Column.RELIABILITY:
                cells.append(_text_of(entry, column))
            else:
                cells.append(_NUMBERS[column].text(offer))
        unfit = offer_id in self._unfit
        return OfferRow(offer_id, tuple(cells), cheap, bool(pick), gone, failed, unfit, refused)

    def widths(self) -> tuple[int, ...]:
        """Each column's width in cells, wide enough for its header and every offer's text.

        Text columns measure their distinct values; numeric ones format only their smallest
        and largest value (a format's width grows with the magnitude), so this stays cheap.
        """
        if self._widths is None:
            entries = self._entries.values()
            out: list[int] = []
            for column in COLUMNS:
                width = cell_len(column.value)
                if column is Column.PICK:
                    width = max(width, len(str(len(self._entries))), len(GONE))
                    if self._refused:
                        width = max(width, len(REFUSED))
                    if self._failed:
                        width = max(width, len(_pick_text(len(self._entries), failed=True)))
                elif column in (Column.TOKS, Column.PER_MTOK):
                    width = max(width, self._speed_width(column))
                elif column is Column.FIT:  # a few distinct verdicts, however many offers
                    texts = {v.cell for v in self._fits}
                    width = max([width, *(cell_len(t) for t in texts)])
                elif column is Column.READY:  # a clock's width grows with its value
                    values = self._values[column]
                    known = list(filter(UNKNOWN_READY.__ne__, values))  # in C: 10,000 values
                    ends = [min(known), max(known)] if known else []
                    texts = {_ready_text(v) for v in ends} | ({"?"} if len(known) < len(values)
                                                                else set())
                    width = max([width, *(cell_len(t) for t in texts)])
                elif column in TEXT_COLUMNS or column is Column.RELIABILITY:
                    if column not in self._offer_widths:  # its distinct cells, from `_entries`
                        texts = self._texts.get(column, set())
                        self._offer_widths[column] = max(map(cell_len, texts), default=0)
                    width = max(width, self._offer_widths[column])
                elif entries:  # the offers' own figures: once per set of offers
                    if column not in self._offer_widths:
                        self._offer_widths[column] = self._number_width(column)
                    width = max(width, self._offer_widths[column])
                out.append(width)
            self._widths = tuple(out)
        return self._widths

    def _number_width(self, column: Column) -> int:
        values, number = self._values[column], _NUMBERS[column]
        width = max(len(number.format(v)) for v in (min(values), max(values)))
        # Any offer priced at our bid (`Offer.bid`), read in C: no property call per offer.
        if column is Column.PRICE and max(map(attrgetter("bid_per_hour"), self._offers)) > 0:
            width = max(width, len(number.format(max(values))) + len(BID_MARK))
        return width

    def _speed_width(self, column: Column) -> int:
        """A speed column's width from its smallest and largest value (a format's width grows
        with the magnitude), each as a prediction (`~`, the wider), and `?` when some offer's
        speed is unknown: not 10,000 cells formatted to find a width."""
        values = self._values[column]
        unknown = UNKNOWN_COST if column is Column.PER_MTOK else 0.0
        known = list(filter(unknown.__ne__, values))  # in C: 10,000 values
        texts = ["?"] if len(known) < len(values) else []
        for value in (min(known), max(known)) if known else ():
            speed = DecodeSpeed(value, value, measured=False)
            texts.append(speed.mtok_cell if column is Column.PER_MTOK else speed.tok_cell)
        return max((cell_len(t) for t in texts), default=0)

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


def _text_of(entry: _Entry, column: Column) -> str:
    """A text column's cell (provider text already sanitised in `_entries`)."""
    if column is Column.PROVIDER:
        return entry.provider
    if column is Column.GPU:
        return entry.gpu
    if column is Column.WHERE:
        return entry.location
    return entry.stock
