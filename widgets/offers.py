"""The Offers pane: every offer, filtered and sorted, picked by keyboard into a fallback order.

The table is a virtual view of `OffersModel`: it holds the model's ordered list of offer ids
and paints only the rows on screen, asking the model for each one by key. Every change (a
refresh, a sort, a filter, a pick) hands the table the new key list, and the cursor is put
back on the same offer by key. Nothing is capped: all matching offers are rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

from mvp_tui.engine.model_fit import Fit
from mvp_tui.engine.outlook import OfferOutlook, Outlook
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.facts import OfferGone
from mvp_tui.widgets.filter_bar import FilterBar
from mvp_tui.widgets.offers_model import FailureText, OffersModel, offer_key
from mvp_tui.widgets.offers_table import OffersTable
from mvp_tui.widgets.pane import Pane


class OffersPane(Pane):
    """Offers from the provider; `set_offers` refreshes, Enter posts `LeaseRequested`."""

    TITLE = "Offers"
    EMPTY_TEXT = (
        "Offers from {provider} appear here, filtered by your limits and sorted by $/h. "
        "Press r to search, / to filter, space to pick a fallback order, Enter to lease "
        "(the focused offer, then the next ones if it is gone)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "filter", id="filter"),
        Binding("s", "sort", "sort", id="offers-sort"),
        Binding("S", "reverse_sort", "reverse", show=False, id="offers-sort-reverse"),
        Binding("space", "pick", "pick", id="offers-pick"),
        Binding("enter", "lease", "lease", id="lease"),
        Binding("escape", "clear_filter", "clear filter", show=False, id="offers-clear-filter"),
        Binding("i", "detail", "offer detail", show=False, id="offers-detail"),
    ]

    class LeaseRequested(Message):
        """Lease these offers, tried in this order (the picks, or the highlighted one)."""

        def __init__(self, offers: tuple[Offer, ...]) -> None:
            super().__init__()
            self.offers = offers

    def __init__(
        self,
        *,
        provider: str,
        id: str | None = "offers-pane",
        max_attempts: int = 5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.max_attempts = max_attempts
        self.model = OffersModel()
        self._clock = clock
        self._read_at: float | None = None  # when the offers were last read (their age)
        self._notes: dict[str, str] = {}  # provider -> why it has no offers on the board
        self._walking: tuple[Offer, ...] = ()  # the offers of the last Enter, in order
        # The offer the cursor was on when a filter hid it: it comes back with the offer,
        # unless the user has moved the cursor since (then `_placed` differs).
        self._hidden_key: str | None = None
        self._placed: str | None = None
        self._keys_state: tuple[bool, bool] | None = None  # what `check_action` last saw
        self.need = ""  # the model's VRAM need in words (the detail view says it)
        self.need_note = ""  # why the need is unknown, when it is
        super().__init__(id=id)

    def empty_text(self) -> str:
        return self.EMPTY_TEXT.format(provider=self.provider)

    def compose_content(self) -> ComposeResult:
        yield FilterBar(
            placeholder="filter GPU / location  (Enter keeps, Esc clears)", id="offers-filter"
        )
        yield OffersTable(id="offers-table")
        yield Static(id="offers-notes")

    def on_mount(self) -> None:
        self.query_one(FilterBar).display = False
        self.query_one(OffersTable).display = False
        self.query_one("#offers-notes", Static).display = False
        self.border_subtitle = ""
        self.set_interval(5.0, self._show_age)

    @property
    def table(self) -> OffersTable:
        return self.query_one(OffersTable)

    def focus_target(self) -> Widget | None:
        return self.table

    # -- the API the app uses ------------------------------------------------------------
    def set_offers(self, offers: Sequence[Offer]) -> None:
        """Show these offers (a search or a refresh); cursor and picks stay on their ids."""
        self.model.set_offers(offers)
        self._read_at = self._clock()
        self.refresh_view()

    def update_offers(
        self,
        offers: Sequence[Offer],
        *,
        providers: Sequence[str],
        failures: FailureText | None = None,
        outlook: Outlook | None = None,
        show_unfit: bool = True,
    ) -> None:
        """A refresh of these providers' offers, in place by row key; the other providers'
        rows (one that failed this time, say) stay on the board. `failures`: the host
        memory read with them (see `set_host_memory`); `outlook`: each offer's fit and
        ~ready (see `set_outlook`)."""
        self.model.update_offers(offers, providers=providers, failures=failures,
                                 outlook=outlook,
                                 show_unfit=show_unfit if outlook is not None else None)
        self._read_at = self._clock()
        self.refresh_view()

    def set_host_memory(self, failure_text: FailureText) -> None:
        """Which offers' hosts failed recently (the app's host memory): badged, listed after
        the others whatever the sort, still pickable; `i` shows why."""
        self.model.set_failures(failure_text)
        self.refresh_view()

    def set_outlook(self, outlook: Outlook, *, show_unfit: bool = True) -> None:
        """Each offer's fit (the model's VRAM need against its VRAM) and ~ready: an offer
        too small is dimmed and listed last, or hidden when `show_unfit` is False."""
        self.model.set_outlook(outlook, show_unfit=show_unfit)
        self.refresh_view()

    def set_notes(self, notes: Mapping[str, str]) -> None:
        """Why a provider has no offers on the board (an error, no credentials), shown in
        the pane's footer; the other providers' offers are unaffected."""
        self._notes = dict(notes)
        lines = [f"{clean_line(p, 12)}: {clean_line(n, 300)}" for p, n in sorted(notes.items())]
        label = self.query_one("#offers-notes", Static)
        label.update(Text("\n".join(lines)))
        label.display = bool(lines)

    @property
    def notes(self) -> dict[str, str]:
        return dict(self._notes)

    def mark_gone(self, offer_ids: Sequence[str]) -> None:
        """The provider said these offers are sold (ids as the walk names them)."""
        keys = [offer_key(o) for o in self._walking if o.offer_id in offer_ids]
        if keys:
            self.model.mark_gone(keys)
            self.refresh_view()

    @on(OfferGone)
    def _gone(self, message: OfferGone) -> None:
        self.mark_gone([message.offer_id])  # then on to the app (it re-reads the board)

    def _show_age(self) -> None:
        if self.model.total:
            self.border_subtitle = Text(self._subtitle())

    def _subtitle(self) -> str:
        text = self.model.subtitle(self.provider)
        if self._read_at is not None:
            text += f" · {age_text(self._clock() - self._read_at)} old"
        return text

    def refresh_view(self) -> None:
        """Hand the table the model's current rows, keeping the cursor on its offer."""
        table = self.table
        focus_was_pane = self.app.focused is self
        key = table.cursor_key()
        if key != self._placed:
            self._hidden_key = None  # the user moved: that is where the cursor belongs now
        table.set_rows(self.model.view(), self.model.row, self.model.widths())
        if self._hidden_key is not None and table.move_cursor_to_key(self._hidden_key):
            self._hidden_key = None
        elif key is not None and not table.move_cursor_to_key(key):
            # Filtered out: the cursor keeps its place; the offer gets it back when it returns.
            self._hidden_key = self._hidden_key or key
            table.scroll_cursor_visible()
        self._placed = table.cursor_key()
        has_rows = self.model.total > 0
        self.set_empty(not has_rows)
        table.display = has_rows
        self.border_subtitle = Text(self._subtitle()) if has_rows else ""
        keys_state = (has_rows, bool(self.model.filter_text))
        if keys_state != self._keys_state:  # the footer redraws only when a key changes
            self._keys_state = keys_state
            self.refresh_bindings()
        if focus_was_pane and has_rows:
            table.focus()

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in {"filter", "sort", "reverse_sort", "pick", "lease"}:
            return False
        if action in {"filter", "sort", "reverse_sort", "pick", "lease", "detail"}:
            return True if self.model.total else None
        if action == "clear_filter":
            return bool(self.model.filter_text)
        return True

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.focus()

    def action_clear_filter(self) -> None:
        self._close_filter(keep=False)

    def action_sort(self) -> None:
        self.model.cycle_sort()
        self.refresh_view()

    def action_reverse_sort(self) -> None:
        self.model.reverse_sort()
        self.refresh_view()

    def action_pick(self) -> None:
        key = self.table.cursor_key()
        if key is not None:
            self.model.toggle_pick(key)
            self.refresh_view()

    def action_lease(self) -> None:
        offers = self.model.chosen(self.table.cursor_key(), self.max_attempts)
        if offers:
            self._walking = offers
            self.post_message(self.LeaseRequested(offers))

    def action_detail(self) -> None:
        """The focused offer in full, and why its host is avoided when it failed recently."""
        key = self.table.cursor_key()
        offer = self.model.offer(key) if key is not None else None
        if key is None or offer is None:
            return
        self.app.push_screen(
            DetailScreen(
                f"Offer {key}",
                offer_detail(offer, self.model.failure(key), self.model.outlook(key),
                             self.need or self.need_note),
            )
        )

    def on_offers_table_row_selected(self, event: OffersTable.RowSelected) -> None:
        # A click on the highlighted row selects it, as Enter does: "lease" here.
        event.stop()
        self.action_lease()

    # -- the filter bar ------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "offers-filter":
            event.stop()
            self.model.set_filter(event.value)
            self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "offers-filter":
            event.stop()
            self._close_filter(keep=True)

    def on_filter_bar_cleared(self, event: FilterBar.Cleared) -> None:
        event.stop()
        self._close_filter(keep=False)

    def _close_filter(self, *, keep: bool) -> None:
        bar = self.query_one(FilterBar)
        if not keep:
            bar.clear_quietly()
            self.model.set_filter("")
            self.refresh_view()
        bar.display = bool(self.model.filter_text)
        self.table.focus()


def offer_detail(
    offer: Offer, failure: str | None, outlook: OfferOutlook | None = None, need: str = ""
) -> str:
    """An offer's facts, one per line (provider text cleaned), and its host's recent failure."""
    lines = [
        f"{clean_line(offer.gpu_name, 80)} × {offer.num_gpus}, {offer.vram_gib_total:.0f} GB VRAM",
        f"{offer.all_in_per_hour:.3f} $/h all-in ({offer.price_per_hour:.3f} $/h + "
        f"{offer.pull_usd:.3f} $ image pull)"
        if offer.pull_usd
        else f"{offer.price_per_hour:.3f} $/h",
        f"where: {clean_line(offer.location, 200) or '?'}",
    ]
    if offer.bid:
        lines.insert(2, f"interruptible: {offer.price_per_hour:.3f} $/h is our bid (on-demand "
                        f"{offer.on_demand_per_hour:.3f} $/h); outbid, the instance is paused "
                        "and the run moves to another host")
    host = offer.machine_id or offer.host_id
    if host:
        lines.append(f"machine: {clean_line(host, 80)}")
    if offer.data_centers:
        lines.append("data centers: " + ", ".join(clean_line(d, 40) for d in offer.data_centers))
    if outlook is not None and (need or outlook.fit.fit is not Fit.UNKNOWN):
        lines.append(f"fit: {outlook.fit.cell}" + (f" ({clean_line(need, 300)})" if need else ""))
    ready = outlook.ready if outlook is not None else None
    if ready is not None and ready.learned_s is not None:
        where = "this host, image cached" if ready.cached_image else "this GPU model"
        lines.append(f"~ready in {ready.cell}: the median of your last {ready.runs} run(s) on "
                     f"{where}")
    elif ready is not None:
        pull = "cached on this host" if ready.cached_image else clock_text(ready.pull_s)
        lines.append(f"~ready in {ready.cell}: image {pull} · model {clock_text(ready.model_s)} "
                     f"· load {clock_text(ready.load_s)}")
    speed = outlook.speed if outlook is not None else None
    if speed is not None:
        ttft = f", TTFT {speed.ttft_ms:.0f} ms" if speed.ttft_ms is not None else ""
        basis = (f"measured: the median of {speed.runs} answer(s) you had on it{ttft}"
                 if speed.measured else "predicted from its memory bandwidth")
        lines.append(f"decode {speed.tok_cell} tok/s · {speed.mtok_cell} $ per 1M tokens "
                     f"({basis})")
    if offer.refused:
        lines += ["", f"Never rented: {clean_line(offer.refused, 600)}.",
                  "Pick another offer; the floor is [image] cuda_min, the disk [vastai] disk_gb."]
    if failure is not None:
        lines += ["", f"Host memory: this host {clean_line(failure, 600)}.",
                  "It is tried after the others; pick it (space) to try it anyway."]
    return "\n".join(lines)


def age_text(seconds: float) -> str:
    """`12 s`, `3 min`, `2 h`: how old the board's prices are."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    return f"{seconds // 3600:.0f} h"
