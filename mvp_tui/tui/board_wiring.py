"""The offer board's background work in the dashboard: searches, the model's size (the fit
column), the stock of live leases' GPU types and their current prices.

Each kind of work has its own exclusive worker group: a new search replaces one still
running (so a refresh never piles up behind another), as does a price check or a size read.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.worker import Worker

from mvp_tui.config import Config
from mvp_tui.engine.ledger import Billing, LeaseLedger
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.providers.base import Offer
from mvp_tui.tui.offer_board import BoardResult, OfferBoard
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane

if TYPE_CHECKING:
    from mvp_tui.tui.run_mode import RunMode

NEED_READ_DELAY_S = 0.5
# The engine's own work (lease, serve, teardown) and the board's: failures are said as one.
WORK_GROUPS = frozenset({"engine", "offers", "prices", "model-size"})


class BoardWiring(App[int]):
    """The app gives it `config`, `mode`, `board` and `ledger`."""

    config: Config
    mode: RunMode
    board: OfferBoard | None
    ledger: LeaseLedger
    _need: ModelNeed | None = None  # the model's VRAM need, once read (the board's fit)
    _board_result: BoardResult | None = None  # the last search's (its notes, memory)
    # The first full frame is written (tui/first_paint.py); a size read asked before waits.
    _first_frame: bool = False
    _need_read_waits: bool = False

    def _work(
        self, work: Callable[[], Coroutine[Any, Any, object]], name: str, group: str
    ) -> Worker[object]:
        # The coroutine is made when the worker runs: one replaced before it started (the
        # group is exclusive) leaves no coroutine never awaited.
        return self.run_worker(work, name=name, group=group, exclusive=True,
                               exit_on_error=False)

    async def _search(self) -> None:
        """Every provider on the board at once; one that fails keeps its last rows and says
        why in the pane's footer, the others' offers are fresh."""
        assert self.board is not None
        result = await self.board.search()
        pane = self.query_one(OffersPane)
        show_unfit = self.config.settings.offers.show_unfit
        pane.update_offers(result.offers, providers=result.answered, failures=result.failure_text,
                           outlook=result.outlook(self._need), show_unfit=show_unfit)
        pane.set_notes(result.notes)
        self._check_stock(result.offers, result.answered)
        self._board_result = result
        if self._need is None:
            # The model's size, read once the board is on screen: the read loads the HTTP
            # client, and a terminal's first frame (written by the driver's thread) comes first.
            self.set_timer(NEED_READ_DELAY_S, self._start_need_read)

    def on_keys_footer_keys_shown(self) -> None:
        """The first full frame went to the terminal: the model-size read may load its HTTP
        client after the delay (a loaded machine paints seconds after the search answers)."""
        self._first_frame = True
        if self._need_read_waits:
            self.set_timer(NEED_READ_DELAY_S, self._start_need_read)

    def _start_need_read(self) -> None:
        if not self._first_frame:
            self._need_read_waits = True
            return
        self._work(self._read_need, "model size", "model-size")

    async def _read_need(self) -> None:
        """The model's VRAM need (a file or the hub): the board's fit column fills in."""
        assert self.board is not None
        self._need, why = await self.board.model_need()
        result, pane = self._board_result, self.query_one(OffersPane)
        if result is None:
            return
        pane.need = self._need.describe() if self._need is not None else ""
        pane.set_outlook(result.outlook(self._need),
                         show_unfit=self.config.settings.offers.show_unfit)
        pane.need_note = why  # `i` says why fit reads "?" (the footer is the providers')

    def _check_stock(self, offers: list[Offer], answered: list[str]) -> None:
        """A live lease whose GPU type its provider no longer offers (a re-lease would find
        none): a badge on its row and one toast."""
        own = self.mode.run().provider_name  # the board searches for a run only
        if own not in answered:
            return  # no fresh word from the lease's provider
        listed = {o.gpu_name for o in offers if o.provider == own}
        leases = self.query_one(LeasesPane)
        for provider_id in self._running_leases():
            view = leases.model.leases.get(provider_id)
            if view is None or not view.gpu:
                continue
            if leases.set_in_stock(provider_id, view.gpu in listed):
                self.notify(
                    f"{clean_line(view.gpu, 40)} is out of stock on {own}: a re-lease of "
                    f"lease {clean_line(provider_id, 40)} would find none",
                    title="out of stock",
                    severity="warning",
                    timeout=15,
                    markup=False,
                )

    def refresh_board(self) -> None:
        """Every `[ui] offers_refresh_secs`: the board re-read in place, and each live
        lease's current $/h asked of its provider."""
        self.action_search_offers()
        if self._running_leases():
            self._work(self._check_prices, "price check", "prices")

    async def _check_prices(self) -> None:
        """A lease whose provider now quotes more than it was leased at: a badge on its row
        and one toast (per new price)."""
        session = self.mode.run()
        for provider_id, leased_at in self._running_leases().items():
            now = await session.current_price(provider_id)
            if now is None:
                continue
            if self.query_one(LeasesPane).set_current_price(provider_id, now, leased_at):
                self.notify(
                    f"lease {clean_line(provider_id, 40)} now costs ${now:.3f}/h "
                    f"(leased at ${leased_at:.3f}/h)",
                    title="price rise",
                    severity="warning",
                    timeout=15,
                    markup=False,
                )

    def _running_leases(self) -> dict[str, float]:
        """The running leases (provider id → the $/h they were leased at), from the ledger."""
        return {
            line.key: line.price_per_hour
            for line in self.ledger.rows(0.0)
            if line.state is Billing.RUNNING
        }

    def action_search_offers(self) -> None:
        """A search of every provider on the board; it replaces one still running (a key's
        and a background refresh's alike)."""
        if self.board is None:  # the bare shell or a replay: no provider to ask
            return
        self._work(self._search, "offer search", "offers")
