"""The offer board's background work in the dashboard: searches, the model's size (the fit
column), the stock of live leases' GPU types and their current prices.

Each kind of work has its own exclusive worker group: a new search
replaces one still running (so a refresh never piles up behind another), as does a price
check or a size read.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from textual.screen import Screen
from textual.worker import Worker

from mvp_tui.config import Config
from mvp_tui.engine.ledger import Billing
from mvp_tui.engine.run_status import RunStatus
from mvp_tui.providers.base import Offer
from mvp_tui.tui.offer_board import BoardResult, OfferBoard
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane

if TYPE_CHECKING:
    from mvp_tui.engine.model_fit import ModelNeed
    from mvp_tui.engine.session import RunSession

NEED_READ_DELAY_S = 0.5
# The engine's own work (lease, serve, teardown) and the board's: failures are said as one.
WORK_GROUPS = frozenset({"engine", "offers", "prices", "model-size"})


class BoardWork:
    """The board of a run's dashboard (`screen`): what it searches, and what it checks of
    the run's live leases (read from the ledger of the run's `status`)."""

    def __init__(self, screen: Screen[Any], board: OfferBoard, session: RunSession,
                 config: Config, status: RunStatus) -> None:
        self._screen, self.board, self._session = screen, board, session
        self._config, self._status = config, status
        self.need: ModelNeed | None = None  # the model's VRAM need, once read (the fit)
        self._result: BoardResult | None = None  # the last search's (its notes, memory)
        # The first full frame is written (tui/first_paint.py); a size read asked before waits.
        self._first_frame = False
        self._need_read_waits = False

    def _work(
        self, work: Callable[[], Coroutine[Any, Any, object]], name: str, group: str
    ) -> Worker[object]:
        # The coroutine is made when the worker runs: one replaced before it started (the
        # group is exclusive) leaves no coroutine never awaited.
        # The app's workers: their failures are said in one place (`WORK_GROUPS`).
        return self._screen.app.run_worker(work, name=name, group=group, exclusive=True,
                                           exit_on_error=False)

    def search(self) -> None:
        """A search of every provider on the board; it replaces one still running (a key's
        and a background refresh's alike)."""
        self._work(self.search_now, "offer search", "offers")

    async def search_now(self) -> None:
        """Every provider on the board at once; one that fails keeps its last rows and says
        why in the pane's footer, the others' offers are fresh."""
        result = await self.board.search()
        pane = self._screen.query_one(OffersPane)
        show_unfit = self._config.settings.offers.show_unfit
        pane.update_offers(result.offers, providers=result.answered, failures=result.failure_text,
                           outlook=result.outlook(self.need), show_unfit=show_unfit)
        pane.set_notes(result.notes)
        self._check_stock(result.offers, result.answered)
        self._result = result
        if self.need is None:
            # The model's size, read once the board is on screen: the read loads the HTTP
            # client, and a terminal's first frame (written by the driver's thread) comes first.
            self._screen.set_timer(NEED_READ_DELAY_S, self._start_need_read)

    def first_frame(self) -> None:
        """The first full frame went to the terminal: the model-size read may load its HTTP
        client after the delay (a loaded machine paints seconds after the search answers)."""
        self._first_frame = True
        if self._need_read_waits:
            self._screen.set_timer(NEED_READ_DELAY_S, self._start_need_read)

    def _start_need_read(self) -> None:
        if not self._first_frame:
            self._need_read_waits = True
            return
        self._work(self._read_need, "model size", "model-size")

    async def _read_need(self) -> None:
        """The model's VRAM need (a file or the hub): the board's fit column fills in."""
        self.need, why = await self.board.model_need()
        result, pane = self._result, self._screen.query_one(OffersPane)
        if result is None:
            return
        pane.need = self.need.describe() if self.need is not None else ""
        pane.set_outlook(result.outlook(self.need),
                         show_unfit=self._config.settings.offers.show_unfit)
        pane.need_note = why  # `i` says why fit reads "?" (the footer is the providers')

    def model_changed(self) -> None:
        """The board's fit is the new model's: unknown until its need is read."""
        self.board.forget_need()
        self.need = None
        result, pane = self._result, self._screen.query_one(OffersPane)
        if result is not None:
            pane.need = ""
            pane.set_outlook(result.outlook(None),
                             show_unfit=self._config.settings.offers.show_unfit)
        self._work(self._read_need, "model size", "model-size")

    def _check_stock(self, offers: list[Offer], answered: list[str]) -> None:
        """A live lease whose GPU type its provider no longer offers (a re-lease would find
        none): a badge on its row and one toast."""
        own = self._status.provider_name
        if own not in answered:
            return  # no fresh word from the lease's provider
        listed = {o.gpu_name for o in offers if o.provider == own}
        leases = self._screen.query_one(LeasesPane)
        for provider_id in self._running_leases():
            view = leases.model.leases.get(provider_id)
            if view is None or not view.gpu:
                continue
            if leases.set_in_stock(provider_id, view.gpu in listed):
                self._screen.notify(
                    f"{clean_line(view.gpu, 40)} is out of stock on {own}: a re-lease of "
                    f"lease {clean_line(provider_id, 40)} would find none",
                    title="out of stock",
                    severity="warning",
                    timeout=15,
                    markup=False,
                )

    def refresh(self) -> None:
        """Every `[ui] offers_refresh_secs`: the board re-read in place, and each live
        lease's current $/h asked of its provider."""
        self.search()
        if self._running_leases():
            self._work(self._check_prices, "price check", "prices")

    async def _check_prices(self) -> None:
        """A lease whose provider now quotes more than it was leased at: a badge on its row
        and one toast (per new price)."""
        for provider_id, leased_at in self._running_leases().items():
            now = await self._session.current_price(provider_id)
            if now is None:
                continue
            if self._screen.query_one(LeasesPane).set_current_price(provider_id, now, leased_at):
                self._screen.notify(
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
            for line in self._status.ledger.rows(0.0)
            if line.state is Billing.RUNNING
        }

    async def aclose(self) -> None:
        await self.board.aclose()
