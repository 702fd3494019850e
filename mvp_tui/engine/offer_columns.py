"""The offer table's columns, each declared once (Posting's one field per setting): its
header, where its figure comes from, how its cell reads, whether it is a number, which way
it sorts first, and when a narrow board drops it.

The board (widgets/offers_model.py) and `mvp-tui offers` (commands/offers.py) read this one
table; the ranking (engine/offer_ranking.py) sorts by a column's figure. No Textual here:
widths in terminal cells are the board's. A column is one `Column` member; a sort key is
also one `SortKey` line (the `s` key's cycle and its label in the pane's subtitle).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from mvp_tui.engine.decode_speed import DecodeSpeed
from mvp_tui.engine.outlook import OfferOutlook
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

UNKNOWN_READY = float("inf")  # an offer with no bandwidth: its wait sorts last
UNKNOWN_COST = float("inf")  # an offer whose decode speed is unknown: its $/Mtok sorts last
UNKNOWN_SPEED = 0.0  # an offer whose decode speed is unknown: slowest
BID_MARK = " bid"  # after the $/h of a Vast interruptible offer: the price is our bid
UNKNOWN_TEXT = "?"

Cell = Callable[[Offer, OfferOutlook], str]


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column. Its cell is `text` when given, else the provider's text `raw` cut to
    `chars` (sanitised; its figure where that is empty), else its figure as `figure` reads
    it. Its figure (the sort value, and the board's width from the smallest and largest) is
    `value` of the offer (read in C by an attrgetter: 10,000 offers a refresh) or `seen` of
    the offer's outlook; `unknown` is the `seen` figure of an offer it is not known for (its
    cell reads `?`)."""

    header: str
    value: Callable[[Offer], float] | None = None
    seen: Callable[[OfferOutlook], float] | None = None
    figure: Callable[[float], str] = str
    raw: Callable[[Offer], str] | None = None
    chars: int = 0
    text: Cell | None = None
    numeric: bool = True
    ascending_first: bool | None = None  # a sort key: True cheapest/soonest first; None: not
    drop_rank: int | None = None  # a narrow board drops rank 0 first; None: always shown
    unknown: float | None = None

    @property
    def has_cell(self) -> bool:
        """Whether an offer gives this column's cell (the board's pick column: the board's)."""
        return any(f is not None for f in (self.text, self.raw, self.value, self.seen))

    def figure_of(self, offer: Offer, outlook: OfferOutlook) -> float:
        """The raw figure this column sorts by (0 for a column without one)."""
        if self.value is not None:
            return self.value(offer)
        return self.seen(outlook) if self.seen is not None else 0.0

    def cell(self, offer: Offer, outlook: OfferOutlook) -> str:
        if self.text is not None:
            return self.text(offer, outlook)
        if self.raw is not None:
            return self.text_of(self.raw(offer), self.value(offer) if self.value else 0.0)
        if self.value is not None:
            return self.figure(self.value(offer))
        return self.seen_text(self.figure_of(offer, outlook))

    def text_of(self, raw: str, figure: float) -> str:
        """A text column's cell: the provider's text, sanitised; where it gives none, the
        column's figure when it has one (RunPod's stock word, else the reliability)."""
        if raw or self.value is None:
            return clean_line(raw, self.chars)
        return self.figure(figure)

    def seen_text(self, figure: float) -> str:
        """An outlook figure's cell: `?` when it is not known."""
        return UNKNOWN_TEXT if figure == self.unknown else self.figure(figure)


def _price(offer: Offer, _outlook: OfferOutlook) -> str:
    text = f"{offer.all_in_per_hour:.3f}"  # the image pull in: what the first hour costs
    return text + BID_MARK if offer.bid else text


def _ready(outlook: OfferOutlook) -> float:
    return outlook.ready.total_s if outlook.ready is not None else UNKNOWN_READY


def _toks(outlook: OfferOutlook) -> float:
    return outlook.speed.tok_per_s if outlook.speed is not None else UNKNOWN_SPEED


def _mtok(outlook: OfferOutlook) -> float:
    speed = outlook.speed
    cost = speed.usd_per_mtok if speed is not None else None
    return cost if cost is not None else UNKNOWN_COST


def _toks_cell(_offer: Offer, outlook: OfferOutlook) -> str:
    return outlook.speed.tok_cell if outlook.speed is not None else UNKNOWN_TEXT


def _mtok_cell(_offer: Offer, outlook: OfferOutlook) -> str:
    return outlook.speed.mtok_cell if outlook.speed is not None else UNKNOWN_TEXT


def _predicted_toks(value: float) -> str:
    """The widest a decode figure reads: a prediction (`~`)."""
    return DecodeSpeed(value, value, measured=False).tok_cell


def _predicted_mtok(value: float) -> str:
    return DecodeSpeed(value, value, measured=False).mtok_cell


class Column(enum.Enum):
    """The table's columns, in order; each member's value is its header, `spec` the rest."""

    spec: ColumnSpec

    def __new__(cls, spec: ColumnSpec) -> Column:
        member = object.__new__(cls)
        member._value_ = spec.header
        member.spec = spec
        return member

    # The board's own: the place in the fallback order and a state's badge (`failed`, `gone`).
    PICK = ColumnSpec("pick")
    PROVIDER = ColumnSpec("provider", raw=attrgetter("provider"), chars=12, numeric=False,
                          drop_rank=6)
    GPU = ColumnSpec("GPU", raw=attrgetter("gpu_name"), chars=40, numeric=False)
    N = ColumnSpec("n", value=attrgetter("num_gpus"), figure="{}".format, drop_rank=4)
    VRAM = ColumnSpec("VRAM", value=attrgetter("vram_gib_total"), figure="{:.0f} GB".format,
                      ascending_first=False, drop_rank=8)
    FIT = ColumnSpec("fit", text=lambda _o, seen: seen.fit.cell, numeric=False)
    PRICE = ColumnSpec("$/h", value=attrgetter("all_in_per_hour"), figure="{:.3f}".format,
                       text=_price, ascending_first=True)
    TOKS = ColumnSpec("tok/s", seen=_toks, figure=_predicted_toks, text=_toks_cell,
                      unknown=UNKNOWN_SPEED, drop_rank=7)
    PER_MTOK = ColumnSpec("$/Mtok", seen=_mtok, figure=_predicted_mtok, text=_mtok_cell,
                          unknown=UNKNOWN_COST, ascending_first=True)
    READY = ColumnSpec("~ready", seen=_ready, figure=clock_text, unknown=UNKNOWN_READY,
                       ascending_first=True)
    PER_GIB = ColumnSpec("$/GB·h", value=attrgetter("price_per_gib_vram_hour"),
                         figure="{:.4f}".format, ascending_first=True, drop_rank=1)
    # RunPod's stock word, else the offer's reliability.
    RELIABILITY = ColumnSpec("stock/rel", value=attrgetter("reliability"), figure="{:.3f}".format,
                             raw=attrgetter("stock"), chars=8, ascending_first=False,
                             drop_rank=2)
    DOWN = ColumnSpec("↓Mb/s", value=attrgetter("down_mbps"), figure="{:,.0f}".format,
                      ascending_first=False, drop_rank=3)
    UP = ColumnSpec("↑Mb/s", value=attrgetter("up_mbps"), figure="{:,.0f}".format, drop_rank=0)
    WHERE = ColumnSpec("where", raw=attrgetter("location"), chars=32, numeric=False,
                       drop_rank=5)

    @property
    def numeric(self) -> bool:
        return self.spec.numeric


COLUMNS: tuple[Column, ...] = tuple(Column)
# What a narrow board drops first, in this order; the columns without a rank always stay.
DROP_ORDER: tuple[Column, ...] = tuple(
    sorted((c for c in COLUMNS if c.spec.drop_rank is not None),
           key=lambda c: c.spec.drop_rank or 0)
)


class SortKey(enum.Enum):
    """What the table is sorted by, named as the pane's subtitle says it; `s` cycles through
    them in this order."""

    column: Column

    def __new__(cls, label: str, column: Column) -> SortKey:
        member = object.__new__(cls)
        member._value_ = label
        member.column = column
        return member

    PRICE = ("$/h", Column.PRICE)
    PER_GIB = ("$/GB", Column.PER_GIB)
    VRAM = ("VRAM", Column.VRAM)
    RELIABILITY = ("reliability", Column.RELIABILITY)
    DOWN = ("↓Mb/s", Column.DOWN)
    READY = ("~ready", Column.READY)
    PER_MTOK = ("$/Mtok", Column.PER_MTOK)

    @property
    def ascending_first(self) -> bool:
        """Cheapest and soonest first for prices and waits, biggest/best first for the rest."""
        return bool(self.column.spec.ascending_first)

    def next(self) -> SortKey:
        members = list(SortKey)
        return members[(members.index(self) + 1) % len(members)]

