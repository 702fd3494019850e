"""The dashboard's one screen: five panes, a status bar and a footer of keys, composed once
(as Posting's `MainScreen`), fed by a run, a replay or nothing (tui/feeds.py).

What the screen knows of the run is one value, `RunStatus` (engine/run_status.py), folded
by the engine port from the events it routes (engine/ui_port.py, tui/engine_port.py); it
talks to the run only with the session's commands. The keys of the panes' grid, the lease,
the teardown and the replay are its own actions (bound by the app as `dashboard.NAME`), and
`check_action` says which make sense now.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.worker import Worker

from mvp_tui.config import Config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import RunStateChanged
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.run_status import RunStatus
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.errors import UserError
from mvp_tui.events import EngineEvent
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.restart import OpenLease
from mvp_tui.providers.base import Offer
from mvp_tui.tui.board_wiring import BoardWork
from mvp_tui.tui.engine_port import PaneRoutes
from mvp_tui.tui.feeds import Feed, ReplayFeed
from mvp_tui.tui.first_paint import KeysFooter
from mvp_tui.tui.layout import SoloLayout
from mvp_tui.tui.offer_board import OfferBoard
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from mvp_tui.widgets.facts import LedgerMoved, NodeServing, OfferGone, RunChanged
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen, LeaseLimits
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import offer_key
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.prompt import PromptPane
from mvp_tui.widgets.sparkline import sparkline
from mvp_tui.widgets.status_bar import RunSummary, StatusBar

if TYPE_CHECKING:
    from mvp_tui.engine.controller import Plan, PlanEnd, StopResult
    from mvp_tui.engine.session import RunSession

# Tab order of the panes, as they sit on screen (left to right, top to bottom).
PANE_ORDER = ("offers-pane", "bootstrap-pane", "leases-pane", "channels-pane", "prompt-pane")
# The screen's actions that only a run can do: a replay hides them (read-only), the bare
# shell shows them dimmed until there is a run.
RUN_ACTIONS = frozenset({"search_offers", "filter", "teardown"})


class DashboardScreen(Screen[None]):
    """The panes of a run (`feed` a `LiveFeed`), of a replay (a `ReplayFeed`), or of
    nothing (None: the bare shell, shown what it is handed)."""

    def __init__(
        self,
        config: Config,
        status: RunStatus,
        port: UiPort,
        feed: Feed | None,
        *,
        hub: ChannelHub | None = None,
        board: OfferBoard | None = None,
        clock: Callable[[], datetime] = datetime.now,
        wall: Callable[[], float],
        tz: tzinfo | None = None,
        label: str = "",
    ) -> None:
        super().__init__()
        self.config, self.status, self.port, self.feed = config, status, port, feed
        self.session: RunSession | None = feed.session if feed is not None else None
        self.hub = feed.hub if feed is not None else hub
        self.board = (
            BoardWork(self, board, self.session, config, status)
            if board is not None and self.session is not None else None
        )
        self._clock, self._wall, self._tz = clock, wall, tz
        self.label = label  # shown in the status bar ("rehearsal": nothing real is rented)
        self.solo = SoloLayout()  # which pane has the screen: zoomed, or a small terminal's
        self._rates: deque[float] = deque(maxlen=24)  # the session's $/h, for its sparkline
        # Where focus was when Enter asked for a lease: unmoved by the time the engine is
        # ready, it goes to the prompt box (the next thing to do).
        self._focus_at_lease: Widget | None = None

    @property
    def ledger(self) -> LeaseLedger:
        return self.status.ledger

    def panes(self) -> ComposeResult:
        """The panes, composed once; the app mounts them with its own compose (so they are
        in place when it is ready), then calls `start`."""
        yield StatusBar(self._clock)
        yield OffersPane(
            provider=self.status.provider_name,
            max_attempts=self.config.settings.lease.max_attempts,
            clock=self._wall,
        )
        yield BootstrapPane(clock=self._wall, tz=self._tz, ledger=self.ledger)
        yield LeasesPane(clock=self._wall, tz=self._tz, tag=self.label, ledger=self.ledger)
        yield ChannelsPane()
        yield PromptPane()
        yield KeysFooter()

    def start(self) -> None:
        """Once the panes are mounted: the port's facts go to them, and the feed starts."""
        self._apply_layout()
        self.update_summary()
        self.query_one("#offers-pane", Pane).focus()
        self.port.connect(PaneRoutes(self, self.port), self.status)
        if self.hub is not None:
            self.query_one(BootstrapPane).attach_hub(self.hub)
            self.query_one(ChannelsPane).attach_hub(self.hub)
        if self.feed is not None:  # what feeds the panes: the run, the archive
            for pane in self.query(Pane):
                pane.read_only = self.feed.read_only
            self.feed.start(self, self, self.config)

    # -- what a feed asks of the dashboard (tui/feeds.py `FeedHost`) ----------------------
    def start_run(self) -> None:
        self._run(self._start(), "start")

    def reset_ledger(self) -> None:
        """A fresh fold of money and status (a replay seeking back: its events come again)."""
        self.status.restart(LeaseLedger())
        self.query_one(LeasesPane).reset(self.ledger)
        self.query_one(BootstrapPane).reset_money(self.ledger)

    def route(self, event: EngineEvent) -> None:
        """One engine event into the ledger and the port, as the engine's sink hands it
        (tests, replay: no engine fed the ledger)."""
        self.ledger.apply(event, self.status.provider_name if self.session else "")
        self.port(event)

    def refresh_board(self) -> None:
        if self.board is not None:
            self.board.refresh()

    # -- the engine port's facts for the screen -------------------------------------------
    @on(LedgerMoved)
    def _ledger_moved(self) -> None:
        self.update_summary()  # the ledger has the figures already

    @on(NodeServing)
    def _node_serving(self) -> None:
        # The prompt box has just opened: focus goes to it, unless the user moved it since.
        before, self._focus_at_lease = self._focus_at_lease, None
        if before is not None and self.focused is before and self.app.screen is self:
            self.query_one(PromptPane).focus()

    @on(OfferGone)
    def _offer_gone(self) -> None:
        # Marked gone at once by the pane; the board is re-read behind the walk.
        self.action_search_offers()

    @on(RunChanged)
    def _run_changed(self, message: RunChanged) -> None:
        if isinstance(message.event, RunStateChanged):  # a small terminal shows the moment's
            self.solo.follow(message.event.state)
            self._apply_layout()
        self.update_summary()  # the status: the run's id, provider, limits

    def update_summary(self) -> None:
        if not self.query(StatusBar):  # closing: its widgets are gone
            return
        replay = self.feed.describe() if self.feed is not None else None
        self.query_one(StatusBar).summary = (
            RunSummary(replay=replay) if replay is not None
            else RunSummary.of(self.status, self._wall(), profile=self.config.profile,
                               label=self.label, rate_trend=self.rate_trend())
        )
        if self.app.screen_stack:  # a run's last steps may come while the app is closing
            self.app.refresh_bindings()

    def rate_trend(self) -> str:
        """$/h over the session: a point whenever the session's $/h changes."""
        rate = self.ledger.rate()
        if not self._rates or self._rates[-1] != rate:
            self._rates.append(rate)
        return sparkline(list(self._rates)) if any(self._rates) else ""

    # -- engine work (the app's workers: their failures are said in one place) ------------
    def _run(self, work: Coroutine[Any, Any, object], name: str) -> Worker[object]:
        return self.app.run_worker(work, name=name, group="engine", exit_on_error=False)

    def _run_session(self) -> RunSession:
        """The run, for what only a run does (the restart check, a walk)."""
        assert self.session is not None, "no engine: the bare shell or a replay"
        return self.session

    async def _start(self) -> None:
        self._run_session().started()
        await self._offer_earlier_leases()
        if self.board is not None:
            await self.board.search_now()

    async def _offer_earlier_leases(self) -> None:
        """Restart safety: leases recorded by earlier runs that still exist are shown at
        once, to tear down, re-attach, or keep (never forgotten, never silent)."""
        session = self._run_session()
        earlier = await session.earlier_leases()
        if not earlier:
            return
        can_attach = (len(earlier) == 1 and self.status.provider_ssh
                      and earlier[0].exists is True and earlier[0].lease.ssh is not None)
        screen = earlier_leases_screen(earlier, can_attach=can_attach)
        choice = await self.app.push_screen_wait(screen)
        if choice == "teardown":
            report = await session.down_earlier()
            if not report.ok:
                self.notify("some earlier leases are NOT confirmed gone; see `mvp-tui ls`",
                            severity="error", timeout=30, markup=False)
        elif choice == "reattach":
            self._run(self._serve(lambda: session.reattach(earlier[0], self._plan())), "re-attach")

    @on(OffersPane.LeaseRequested)
    def _lease_requested(self, message: OffersPane.LeaseRequested) -> None:
        status = self.status
        if self.session is None or not status.leasing_open or status.busy or self.ledger.live:
            self.notify(
                "a lease is already running or in progress", severity="warning", markup=False
            )
            return
        offers = self._leasable(self.session, message.offers)
        if not offers:
            return
        self._focus_at_lease = self.focused
        bills = any(self._bills(kind) for kind in {o.provider for o in offers})
        if not bills or not self.config.confirm_lease:  # [vastai] confirm_lease = false
            self._start_lease(offers)
            return
        confirm = self.lease_confirm_screen(offers)
        self.app.push_screen(confirm, lambda ok: self._start_lease(offers) if ok else None)

    def _leasable(self, session: RunSession, offers: tuple[Offer, ...]) -> tuple[Offer, ...]:
        """The offers this dashboard can lease: all of them when it can start an engine for
        another provider, else the run's own provider's (and it says why the rest are not)."""
        own = self.status.provider_name
        if session.can_switch:
            return offers
        kept = tuple(o for o in offers if o.provider == own)
        others = sorted({o.provider for o in offers} - {own})
        if others:
            self.notify(
                f"offers of {', '.join(others)} are leased from `mvp-tui --provider "
                f"{others[0]}`; this run leases on {own}",
                severity="warning",
                markup=False,
            )
        return kept

    def _bills(self, kind: str) -> bool:
        if kind == self.status.provider_name:
            return self.status.provider_bills
        return self.board.board.info_billing(kind) if self.board is not None else True

    def lease_confirm_screen(self, offers: tuple[Offer, ...]) -> LeaseConfirmScreen:
        """The confirm before anything bills: the offers in the order they will be tried."""
        pane = self.query_one(OffersPane)
        fits = [pane.model.outlook(offer_key(o)).fit for o in offers]
        limits = self.status.limits  # unset or 0: not set
        shown = LeaseLimits(max_price_per_hour=limits.max_price_per_hour,
                            max_spend_usd=limits.max_spend_usd, max_hours=limits.max_hours)
        return LeaseConfirmScreen(offers, shown, provider=self.config.provider, fits=fits,
                                  need=pane.need)

    def _plan(self) -> Plan:
        from mvp_tui.engine.controller import Plan

        return Plan(max_tokens=self.config.settings.prompt.max_tokens, rpc=True)

    def _start_lease(self, offers: tuple[Offer, ...]) -> None:
        if not self.status.leasing_open:  # the run closed while the confirm was open
            return
        session = self._run_session()
        self._run(self._serve(
            lambda: session.lease_and_serve(offers, self._plan(), on_fallback=self._fallback)
        ), "lease")

    def _fallback(self, kind: str, following: str, reason: str) -> None:
        self.notify(clean_line(reason, 600), title=f"no lease on {kind}; trying {following}",
                    severity="warning", timeout=15, markup=False)

    async def _serve(self, lifecycle: Callable[[], Awaitable[PlanEnd]]) -> None:
        """A lease (new or re-attached) from the walk to serving, owned by the session:
        a failure tears it down (confirmed) and says why; a stop just ends it."""
        from mvp_tui.engine.controller import RunAborted

        try:
            await lifecycle()
        except RunAborted as aborted:
            self.notify(clean_line(aborted.reason, 600), title="the run stopped",
                        severity="error", timeout=15, markup=False)
            self._say_left(aborted.result)
        except UserError as exc:  # nothing was leased (RunFailed, ConfigError): say why
            self.notify(clean_line(str(exc), 600), title="cannot lease", severity="error",
                        timeout=15, markup=False)
        self.update_summary()

    def _say_left(self, result: StopResult) -> None:
        if not result.nothing_bills:
            text = clean_line("; ".join(result.left_lines()), 600)
            self.notify(text, title="may still bill", severity="error", timeout=60, markup=False)

    # -- the Prompt pane's and the Leases pane's requests ---------------------------------
    @on(PromptPane.PromptSubmitted)
    def _prompt(self, message: PromptPane.PromptSubmitted) -> None:
        prompt_id = self.session.submit(message.text) if self.session is not None else None
        if prompt_id is None:  # refused: nothing of it stays in the pane
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        self.query_one(PromptPane).asked(prompt_id, message.text)

    @on(PromptPane.NewConversationRequested)
    def _new_conversation(self) -> None:
        if self.session is not None:
            self.session.new_conversation()

    @on(PromptPane.PromptCancelRequested)
    def _cancel_prompt(self) -> None:
        if self.session is not None:
            self.session.cancel_prompt()

    @on(PromptPane.SaveRequested)
    def _save_transcript(self, message: PromptPane.SaveRequested) -> None:
        """ctrl+s: the Prompt pane's transcript, in the run's directory."""
        run_id, store = self.status.run_id, RecordStore(self.config.state_dir)
        run_dir = Path(self.status.run_dir) if self.status.run_dir else None
        where = run_dir or (store.run_dir(run_id) if run_id else store.state_dir / "transcripts")
        try:
            path = message.transcript.save(where, "mvp-tui: the Prompt pane's transcript")
        except OSError as exc:
            self.notify(clean_line(f"cannot save the transcript: {exc}", 300),
                        severity="error", markup=False)
            return
        self.notify(clean_line(f"transcript saved: {path}", 300), markup=False)

    @on(PromptPane.LeaveRequested)
    def _leave_prompt_box(self) -> None:
        self.query_one("#offers-pane", Pane).focus()

    @on(LeasesPane.TeardownRequested)
    def _teardown_requested(self, message: LeasesPane.TeardownRequested) -> None:
        self._run(self._teardown(), "teardown")

    async def _teardown(self) -> None:
        if self.session is None:  # no run to stop
            return
        self._say_left(await self.session.stop(reason="teardown requested"))
        self.update_summary()

    # -- panes ---------------------------------------------------------------------------
    def _panes(self) -> list[Pane]:
        return [self.query_one(f"#{pane_id}", Pane) for pane_id in PANE_ORDER]

    def _current_pane_index(self) -> int:
        focused: Widget | None = self.focused
        panes = self._panes()
        while focused is not None:
            if focused in panes:
                return panes.index(focused)
            parent = focused.parent
            focused = parent if isinstance(parent, Widget) else None
        return -1

    def _focus_pane(self, step: int) -> None:
        panes = self._panes()
        index = self._current_pane_index()
        target = panes[(index + step) % len(panes)] if index >= 0 else panes[0]
        # One pane on screen (zoomed, or a small terminal): Tab brings the next one up.
        if self.solo.zoomed is not None:
            self.solo.zoomed = target.id
        elif self.solo.solo(self.app.size.width, self.app.size.height) is not None:
            self.solo.picked = target.id
        self._apply_layout()
        target.focus()

    def on_resize(self, event: events.Resize) -> None:
        self._apply_layout()

    def _apply_layout(self) -> None:
        """Which pane has the screen (tui/layout.py), as `-solo` classes."""
        if not self.query(StatusBar):
            return  # not composed yet, or closing
        solo = self.solo.solo(self.app.size.width, self.app.size.height)
        self.set_class(solo is not None, "-solo")
        for pane in self._panes():
            pane.set_class(pane.id == solo, "-solo")
            zoomed = pane.id == self.solo.zoomed
            pane.border_title = f"{pane.TITLE} · zoomed (z: all panes)" if zoomed else pane.TITLE
        if solo is not None and self.app.screen is self and self._current_pane_index() != (
            PANE_ORDER.index(solo)
        ):
            self.query_one(f"#{solo}", Pane).focus()  # a hidden pane cannot keep the focus

    # -- keys (bound by the app as `dashboard.NAME`) --------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that need a run or a lease are shown dimmed until they make sense; a
        replay's keys are hidden but in a replay, and a run's hidden in one (read-only)."""
        read_only = self.feed is not None and self.feed.read_only
        if action == "replay":
            return read_only
        if action in RUN_ACTIONS and read_only:
            return False
        if action == "search_offers":
            return True if self.session is not None and not self.status.busy else None
        if action == "filter":
            return True if self.session is not None else None
        if action == "teardown":
            # A lease being brought up can be torn down too; one already ending cannot.
            return True if self.ledger.live and not self.status.tearing_down else None
        return True

    def action_focus_next_pane(self) -> None:
        self._focus_pane(+1)

    def action_focus_previous_pane(self) -> None:
        self._focus_pane(-1)

    def action_toggle_zoom(self) -> None:
        """The focused pane fills the screen, or the grid comes back."""
        index = self._current_pane_index()
        self.solo.toggle_zoom(PANE_ORDER[index] if index >= 0 else PANE_ORDER[0])
        self._apply_layout()

    def action_search_offers(self) -> None:
        """A search of every provider on the board (none in the bare shell or a replay)."""
        if self.board is not None:
            self.board.search()

    def action_filter(self) -> None:
        offers = self.query_one(OffersPane)
        offers.focus()
        offers.action_filter()

    def action_teardown(self) -> None:
        self.query_one(LeasesPane).focus()
        self.query_one(LeasesPane).action_teardown()

    def action_replay(self, name: str, *parameters: object) -> None:
        """A replay's key (`replay('pause')`, `replay('seek', -1)`, ...)."""
        if isinstance(self.feed, ReplayFeed):
            self.feed.act(name, *parameters)
            self.update_summary()

    def on_keys_footer_keys_shown(self) -> None:
        """The first full frame went to the terminal (tui/first_paint.py)."""
        if self.board is not None:
            self.board.first_frame()

    async def on_unmount(self) -> None:
        if self.board is not None:
            await self.board.aclose()


def earlier_leases_screen(earlier: list[OpenLease], *, can_attach: bool) -> ConfirmScreen:
    """The restart check: what earlier runs left, and what to do with it."""
    lines = [
        f"  run {o.run_id}: {o.lease.provider_id or o.lease.label} {o.lease.gpu_name} "
        f"${o.lease.price_per_hour:.3f}/h "
        f"({'exists' if o.exists else 'the provider did not answer'})"
        for o in earlier
    ]
    choices = [Choice("keep", "Keep for later"), Choice("teardown", "Tear down", "error")]
    if can_attach:
        choices.insert(1, Choice("reattach", "Re-attach", "primary"))
    return ConfirmScreen(
        f"{len(earlier)} lease(s) from earlier runs may still bill",
        "\n".join(clean_line(line, 200) for line in lines)
        + "\n\nTear them down (confirmed by the provider), re-attach, or keep them for "
        "`mvp-tui down` later.",
        choices,
        focus="teardown",
        cancel_value="keep",
    )
