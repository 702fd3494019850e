"""The one full-screen dashboard: five panes, a status bar and a footer of keys.

The app talks to the run only through its `RunSession` (engine/session.py) and hears from it
only through the engine port: each engine event becomes a typed fact posted to the pane that
owns it (engine/ui_port.py, tui/engine_port.py, widgets/facts.py); lease facts and a few
others bubble on to the app. The board's background work is tui/board_wiring.py, every way
out tui/exit_path.py.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import datetime, tzinfo
from typing import Any, ClassVar

from textual import events, on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.toml_file import write_key
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.controller import Plan, PlanEnd, RunAborted, RunController, RunState, StopResult
from mvp_tui.engine.endpoint_words import endpoint_warnings, idle_stop_line
from mvp_tui.engine.events import EndpointReady, IdleStopNotice, RunStateChanged
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.session import EngineFactory, RunSession
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.errors import UserError
from mvp_tui.events import EngineEvent
from mvp_tui.keymap import APP_BINDINGS, KeyBinding
from mvp_tui.lease.endpoint_record import EndpointRecord
from mvp_tui.lease.restart import OpenLease
from mvp_tui.providers.base import Offer
from mvp_tui.themes import APP_CSS_PATH, DARK_VARIABLES, THEMES
from mvp_tui.tui.bench_action import PALETTE_LEVEL_S, bench_live_run, palette_levels
from mvp_tui.tui.bindings import all_bindings
from mvp_tui.tui.board_wiring import WORK_GROUPS
from mvp_tui.tui.endpoint_actions import (
    WEBUI_PAGE_KEPT_S,
    Opener,
    clipboard_text,
    default_opener,
    remove_login_page,
    web_ui_url,
)
from mvp_tui.tui.engine_port import PaneRoutes
from mvp_tui.tui.exit_path import ExitPath
from mvp_tui.tui.first_paint import KeysFooter
from mvp_tui.tui.layout import SoloLayout
from mvp_tui.tui.model_picking import ModelPicking
from mvp_tui.tui.offer_board import BOARD_PROVIDERS
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.tui.run_mode import RunMode, choose_mode
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from mvp_tui.widgets.facts import LedgerMoved, NodeServing, OfferGone, RunChanged
from mvp_tui.widgets.help_screen import HelpScreen, key_label
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen, LeaseLimits
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import offer_key
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.prompt import PromptPane
from mvp_tui.widgets.sparkline import sparkline
from mvp_tui.widgets.status_bar import StatusBar

# Tab order of the panes, as they sit on screen (left to right, top to bottom).
PANE_ORDER = ("offers-pane", "bootstrap-pane", "leases-pane", "channels-pane", "prompt-pane")


def _binding(spec: KeyBinding) -> Binding:
    # Pane cycling and quitting must win over any focused widget's own use of the key.
    priority = spec.id in {"next-pane", "previous-pane", "interrupt"}
    return Binding(
        spec.keys, spec.action, spec.description, show=spec.show, id=spec.id, priority=priority
    )


class MvpApp(ModelPicking, ExitPath):
    """The dashboard. Without an engine it is the bare shell (tests, `--help` screenshots)."""

    CSS_PATH = str(APP_CSS_PATH)
    TITLE = "mvp-tui"
    BINDINGS: ClassVar[list[BindingType]] = [_binding(spec) for spec in APP_BINDINGS]

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], datetime] = datetime.now,
        engine: RunEngine | None = None,
        sink: UiPort | None = None,
        hub: ChannelHub | None = None,
        replay: ReplayControl | None = None,
        wall: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
        engine_for: EngineFactory | None = None,
        label: str = "",
        board_kinds: Sequence[str] = BOARD_PROVIDERS,
    ) -> None:
        self.config = config
        self._clock = clock
        self._wall = wall
        self._tz = tz  # clock times in the panes; None: local time (tests fix one)
        # What is shown: a run, a replay or the bare shell (tui/run_mode.py); the app asks it
        # rather than testing which.
        self.mode: RunMode = choose_mode(config, engine=engine, engine_for=engine_for,
                                         replay=replay, hub=hub)
        self.label = label  # shown in the status bar ("rehearsal": nothing real is rented)
        # The engine's sink (the run's events come through it); the bare shell and a replay
        # have their own, for the events they are shown.
        self.port = sink if sink is not None else UiPort()
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        # The run's typed settings: the engine's (built once from this config), else these.
        self._prompt_settings = self.mode.prompt_settings
        theme_name = config.settings.ui.theme
        if theme_name not in self.available_themes:
            known = ", ".join(sorted(self.available_themes))
            raise ConfigError(
                f"[ui] theme = {theme_name!r} (from {config.sources.get('ui.theme')}) is not "
                f"a theme; use one of: {known}"
            )
        self.theme = theme_name
        if config.ui_keys:
            self.set_keymap(dict(config.ui_keys))
        self.board = self.mode.offer_board(config, board_kinds)
        # The one fold of lease money: the session's (the engine feeds it), or the app's own
        # for the events it is shown (a replay, the bare shell in tests; `route` feeds it).
        self.ledger = self.mode.new_ledger()
        self._forced_live = 0  # the bare shell's stand-in count (tests)
        self.layout = SoloLayout()  # which pane has the screen: zoomed, or a small terminal's
        self._rates: deque[float] = deque(maxlen=24)  # the session's $/h, for its sparkline
        # Where focus was when Enter asked for a lease: unmoved by the time the engine is
        # ready, it goes to the prompt box (the next thing to do).
        self._focus_at_lease: Widget | None = None
        self.web_opener: Opener = default_opener  # tests record the URL instead
        self._idle_warned = False  # the node's idle stop warned: the next key postpones it

    @property
    def session(self) -> RunSession | None:
        """The run (None: the bare shell or a replay)."""
        return self.mode.session

    @property
    def engine(self) -> RunEngine | None:
        """The engine of the provider being walked (None: the bare shell or a replay)."""
        return self.mode.engine

    @property
    def controller(self) -> RunController | None:
        return self.mode.controller

    @property
    def limits(self) -> Limits:
        """The run's limits: those of the engine of the moment (a provider switch reads its
        own), else the configuration's."""
        return self.mode.limits

    @property
    def hub(self) -> ChannelHub | None:
        return self.mode.hub

    @property
    def live_leases(self) -> int:
        """Leases that bill now, from the ledger."""
        return max(self.ledger.live, self._forced_live)

    @live_leases.setter
    def live_leases(self, count: int) -> None:
        # Tests set this directly for a shell without an engine.
        self._forced_live = count

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual themes of its own lack our semantic variables: fall back to the dark values.
        return dict(DARK_VARIABLES)

    def compose(self) -> ComposeResult:
        yield StatusBar(self._clock)
        yield OffersPane(
            provider=self.mode.provider_name,
            max_attempts=self.config.settings.lease.max_attempts,
            clock=self._wall,
        )
        yield BootstrapPane(clock=self._wall, tz=self._tz, ledger=self.ledger)
        yield LeasesPane(clock=self._wall, tz=self._tz, tag=self.label, ledger=self.ledger)
        yield ChannelsPane()
        yield PromptPane()
        yield KeysFooter()

    def on_mount(self) -> None:
        self._apply_layout()
        self._update_summary()
        self.theme_changed_signal.subscribe(self, self._persist_theme)
        self.query_one("#offers-pane", Pane).focus()
        self.port.connect(PaneRoutes(self, self.port))
        self.mode.start(self)  # what feeds the panes: the run, the archive, or nothing

    # -- what a mode asks of the dashboard (tui/run_mode.py) ------------------------------
    def wall(self) -> float:
        return self._wall()

    def update_summary(self) -> None:
        self._update_summary()

    def start_run(self) -> None:
        self._run(self._start(), "start")

    def reset_ledger(self) -> None:
        """A fresh fold of money (a replay seeking back: its events come again)."""
        self.ledger = LeaseLedger()
        self.query_one(LeasesPane).reset(self.ledger)
        self.query_one(BootstrapPane).reset_money(self.ledger)

    def route(self, event: EngineEvent) -> None:
        """One engine event into the ledger and the port, as the engine's sink hands it
        (tests, replay: no engine fed the ledger)."""
        self.ledger.apply(event, self.mode.booked_as)
        self.port(event)

    def _session(self) -> RunSession:
        return self.mode.run()

    async def on_unmount(self) -> None:
        if self.board is not None:
            await self.board.aclose()
        await self.mode.close()

    # -- the engine port's facts for the app ----------------------------------------------
    @on(LedgerMoved)
    def _ledger_moved(self) -> None:
        self._update_summary()  # the ledger has the figures already

    @on(NodeServing)
    def _node_serving(self) -> None:
        # The prompt box has just opened: focus goes to it, unless the user moved it since.
        before, self._focus_at_lease = self._focus_at_lease, None
        if before is not None and self.focused is before and self.screen is self.screen_stack[0]:
            self.query_one(PromptPane).focus()

    @on(OfferGone)
    def _offer_gone(self) -> None:
        # Marked gone at once by the pane; the board is re-read behind the walk.
        self.action_search_offers()

    @on(RunChanged)
    def _run_changed(self, message: RunChanged) -> None:
        event = message.event
        if isinstance(event, EndpointReady | IdleStopNotice):
            self._say_endpoint(event)
        if isinstance(event, RunStateChanged):  # a small terminal shows what this moment needs
            self.layout.follow(RunState(event.state))
            self._apply_layout()
        if self.screen_stack:  # a run's last steps may come while the app is closing
            self.refresh_bindings()

    def _update_summary(self) -> None:
        if not self.query(StatusBar):  # the app is closing: its widgets are gone
            return
        self.query_one(StatusBar).summary = self.mode.summary(self)
        self.refresh_bindings()

    def rate_trend(self) -> str:
        """$/h over the session: a point whenever the session's $/h changes."""
        rate = self.ledger.rate()
        if not self._rates or self._rates[-1] != rate:
            self._rates.append(rate)
        return sparkline(list(self._rates)) if any(self._rates) else ""

    # -- engine work ---------------------------------------------------------------------------
    def _run(self, work: Coroutine[Any, Any, object], name: str) -> Worker[object]:
        return self.run_worker(work, name=name, group="engine", exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # One place for the run's failures: say what failed and the fix, never a traceback.
        worker = event.worker
        if worker.group not in WORK_GROUPS or event.state is not WorkerState.ERROR:
            return
        error = worker.error
        if isinstance(error, UserError):
            text = self.mode.redact(str(error))
        else:
            text = f"unexpected {type(error).__name__}: {error}"
        self.notify(clean_line(text, 600), title=f"{worker.name} failed", severity="error",
                    timeout=15, markup=False)

    @property
    def _busy(self) -> bool:
        """A lease is being made, brought up or torn down."""
        return self.mode.busy

    async def _start(self) -> None:
        self._session().started()
        await self._offer_earlier_leases()
        await self._search()

    async def _offer_earlier_leases(self) -> None:
        """Restart safety: leases recorded by earlier runs that still exist are shown at
        once, to tear down, re-attach, or keep (never forgotten, never silent)."""
        session = self._session()
        earlier = await session.earlier_leases()
        if not earlier:
            return
        screen = self.earlier_leases_screen(earlier, can_attach=self._can_attach(earlier))
        choice = await self.push_screen_wait(screen)
        if choice == "teardown":
            report = await session.down_earlier([o.run_id for o in earlier])
            if not report.ok:
                self.notify("some earlier leases are NOT confirmed gone; see `mvp-tui ls`",
                            severity="error", timeout=30, markup=False)
        elif choice == "reattach":
            self._run(self._serve(lambda: session.reattach(earlier[0], self._plan())), "re-attach")

    def _can_attach(self, earlier: list[OpenLease]) -> bool:
        session = self._session()  # the restart check is a run's
        return (
            len(earlier) == 1 and session.provider_ssh
            and earlier[0].exists is True and earlier[0].lease.ssh is not None
        )

    @staticmethod
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

    @on(OffersPane.LeaseRequested)
    def _lease_requested(self, message: OffersPane.LeaseRequested) -> None:
        if not self.mode.leasing_open or self._busy or self.live_leases:
            self.notify(
                "a lease is already running or in progress", severity="warning", markup=False
            )
            return
        offers = self._leasable(message.offers)
        if not offers:
            return
        self._focus_at_lease = self.focused
        bills = any(self._bills(kind) for kind in {o.provider for o in offers})
        if not bills or not self.config.confirm_lease:  # [vastai] confirm_lease = false
            self._start_lease(offers)
            return
        confirm = self.lease_confirm_screen(offers)
        self.push_screen(confirm, lambda ok: self._start_lease(offers) if ok else None)

    def _leasable(self, offers: tuple[Offer, ...]) -> tuple[Offer, ...]:
        """The offers this dashboard can lease: all of them when it can start an engine for
        another provider, else the run's own provider's (and it says why the rest are not)."""
        own = self._session().provider_name
        if self._session().can_switch:
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
        session = self._session()
        if kind == session.provider_name:
            return session.provider_bills
        return self.board.info_billing(kind) if self.board is not None else True

    def lease_confirm_screen(self, offers: tuple[Offer, ...]) -> LeaseConfirmScreen:
        """The confirm before anything bills: the offers in the order they will be tried."""
        pane = self.query_one(OffersPane)
        fits = [pane.model.outlook(offer_key(o)).fit for o in offers]
        return LeaseConfirmScreen(offers, self._lease_limits(), provider=self.config.provider,
                                  fits=fits, need=pane.need)

    def _plan(self) -> Plan:
        return Plan(max_tokens=self._prompt_settings.max_tokens, rpc=True)

    def _lease_limits(self) -> LeaseLimits:
        limits = self.limits  # unset or 0: not set
        return LeaseLimits(
            max_price_per_hour=limits.max_price_per_hour,
            max_spend_usd=limits.max_spend_usd,
            max_hours=limits.max_hours,
        )

    def _start_lease(self, offers: tuple[Offer, ...]) -> None:
        if not self.mode.leasing_open:  # the run closed while the confirm was open
            return
        self._run(self._walk_providers(offers), "lease")

    async def _walk_providers(self, offers: tuple[Offer, ...]) -> None:
        """The offers in their order, across providers (the session walks them: an engine
        per provider, the next provider's offers when one gave nothing)."""
        session = self._session()
        await self._serve(
            lambda: session.lease_and_serve(offers, self._plan(), on_fallback=self._fallback)
        )

    def _fallback(self, kind: str, following: str, reason: str) -> None:
        self.notify(clean_line(reason, 600), title=f"no lease on {kind}; trying {following}",
                    severity="warning", timeout=15, markup=False)

    async def _serve(self, lifecycle: Callable[[], Awaitable[PlanEnd]]) -> None:
        """A lease (new or re-attached) from the walk to serving, owned by the session:
        a failure tears it down (confirmed) and says why; a stop just ends it."""
        try:
            await lifecycle()
        except RunAborted as aborted:
            self.notify(clean_line(aborted.reason, 600), title="the run stopped",
                        severity="error", timeout=15, markup=False)
            self._say_left(aborted.result)
        except UserError as exc:  # nothing was leased (RunFailed, ConfigError): say why
            self.notify(clean_line(str(exc), 600), title="cannot lease", severity="error",
                        timeout=15, markup=False)
        self._update_summary()

    def _say_left(self, result: StopResult) -> None:
        if not result.nothing_bills:
            text = clean_line("; ".join(result.left_lines()), 600)
            self.notify(text, title="may still bill", severity="error", timeout=60, markup=False)

    @on(PromptPane.PromptSubmitted)
    def _prompt(self, message: PromptPane.PromptSubmitted) -> None:
        prompt_id = self.mode.submit(message.text)
        if prompt_id is None:  # refused: nothing of it stays in the pane
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        self.query_one(PromptPane).asked(prompt_id, message.text)

    @on(PromptPane.NewConversationRequested)
    def _new_conversation(self) -> None:
        self.mode.new_conversation()

    @on(PromptPane.SaveRequested)
    def _save_transcript(self, message: PromptPane.SaveRequested) -> None:
        try:
            path = message.transcript.save(self.mode.transcript_dir(self),
                                           "mvp-tui: the Prompt pane's transcript")
        except OSError as exc:
            self.notify(clean_line(f"cannot save the transcript: {exc}", 300),
                        severity="error", markup=False)
            return
        self.notify(clean_line(f"transcript saved: {path}", 300), markup=False)

    @on(PromptPane.LeaveRequested)
    def _leave_prompt_box(self) -> None:
        self.query_one("#offers-pane", Pane).focus()

    @on(PromptPane.PromptCancelRequested)
    def _cancel_prompt(self) -> None:
        self.mode.cancel_prompt()

    @on(LeasesPane.TeardownRequested)
    def _teardown_requested(self, message: LeasesPane.TeardownRequested) -> None:
        self._run(self._teardown(), "teardown")

    async def _teardown(self) -> None:
        result = await self.mode.stop(reason="teardown requested")
        if result is None:  # no run to stop
            return
        self._say_left(result)
        self._update_summary()

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
        if self.layout.zoomed is not None:
            self.layout.zoomed = target.id
        elif self.layout.solo(self.size.width, self.size.height) is not None:
            self.layout.picked = target.id
        self._apply_layout()
        target.focus()

    # -- which pane has the screen (tui/layout.py) ----------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._apply_layout()

    def action_toggle_zoom(self) -> None:
        """The focused pane fills the screen, or the grid comes back."""
        index = self._current_pane_index()
        self.layout.toggle_zoom(PANE_ORDER[index] if index >= 0 else PANE_ORDER[0])
        self._apply_layout()

    def _apply_layout(self) -> None:
        if not self.screen_stack or not self.query(StatusBar):
            return  # not composed yet, or closing
        solo = self.layout.solo(self.size.width, self.size.height)
        main = self.screen_stack[0]
        main.set_class(solo is not None, "-solo")
        for pane in self._panes():
            pane.set_class(pane.id == solo, "-solo")
            zoomed = pane.id == self.layout.zoomed
            pane.border_title = f"{pane.TITLE} · zoomed (z: all panes)" if zoomed else pane.TITLE
        if solo is not None and self.screen is main and self._current_pane_index() != (
            PANE_ORDER.index(solo)
        ):
            self.query_one(f"#{solo}", Pane).focus()  # a hidden pane cannot keep the focus

    def action_focus_next_pane(self) -> None:
        self._focus_pane(+1)

    def action_focus_previous_pane(self) -> None:
        self._focus_pane(-1)

    # -- the run's OpenAI endpoint and the node's idle stop -------------------------------
    def _say_endpoint(self, event: EndpointReady | IdleStopNotice) -> None:
        if isinstance(event, EndpointReady):
            for warning in endpoint_warnings(event):
                self.notify(warning, title="OpenAI endpoint", severity="warning", timeout=20,
                            markup=False)
            return
        said = idle_stop_line(event)
        self._idle_warned = event.state == "warning"
        if said is None:
            return
        if self._idle_warned:  # up to the stop itself (a key or a request postpones it)
            self.notify(said, title="idle stop", severity="warning", markup=False,
                        timeout=max(event.stops_in_s or 0.0, 10.0))
        else:
            self.notify(said, title="idle stop", timeout=5.0, markup=False)

    def _serving_endpoint(self) -> EndpointRecord | None:
        return self.mode.endpoint

    def action_copy_endpoint(self) -> None:
        endpoint = self._serving_endpoint()
        if endpoint is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        self.copy_to_clipboard(clipboard_text(endpoint))
        self.notify(f"copied OPENAI_BASE_URL ({endpoint.openai_base_url}) and OPENAI_API_KEY",
                    title="endpoint", markup=False)

    def action_open_web_ui(self) -> None:
        endpoint = self._serving_endpoint()
        if endpoint is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        session = self._session()  # only a run serves
        try:
            url = web_ui_url(endpoint, session.run_dir)
        except (OSError, ValueError) as exc:
            self.notify(clean_line(str(exc), 300), title="web UI", severity="error",
                        markup=False)
            return
        self.web_opener(url)
        run_dir = session.run_dir
        self.set_timer(WEBUI_PAGE_KEPT_S, lambda: remove_login_page(run_dir))
        self.notify(f"opening the engine's web UI on port {endpoint.port} (the node's own "
                    "pages, on a name of their own)", title="web UI", markup=False)

    bench_level_s = PALETTE_LEVEL_S  # seconds per level of the palette's bench

    def action_bench(self) -> None:
        """`mvp-tui bench` on the live run: one stream, then [prompt] concurrency (else 4)."""
        endpoint = self._serving_endpoint()
        if endpoint is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        run_id = self._session().run_id
        levels = palette_levels(self.config.settings.prompt.concurrency)
        self.notify(f"measuring the served model at {' then '.join(map(str, levels))} "
                    f"stream(s), {self.bench_level_s:g} s each", title="bench", markup=False)
        self.run_worker(self._bench(endpoint, run_id), name="bench", group="bench",
                        exclusive=True, exit_on_error=False)

    async def _bench(self, endpoint: EndpointRecord, run_id: str) -> None:
        outcome = await bench_live_run(endpoint, run_id, self.config.state_dir,
                                       self.config.settings.prompt.concurrency,
                                       self.bench_level_s)
        if not self.screen_stack:  # the app closed meanwhile
            return
        self.push_screen(ConfirmScreen(outcome.title, self.mode.redact(outcome.text),
                                       [Choice("close", "Close", "primary")], focus="close",
                                       cancel_value="close"))

    def on_key(self) -> None:
        """A key while the idle stop warned: the node hears of it (it counts as use)."""
        if self._idle_warned:
            self._idle_warned = False
            self.mode.postpone_idle_stop(self)

    # -- the command palette -------------------------------------------------------------
    def _key_of(self, binding_id: str) -> str:
        """The key a binding has now (a `[ui.keys]` remap applied), as a person reads it."""
        spec = next((b for b in all_bindings() if b.id == binding_id), None)
        keys = self.config.ui_keys.get(binding_id, spec.keys if spec is not None else "")
        return key_label(keys)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The app's own commands first, each with its key (as Posting shows them)."""
        ours = [
            ("Lease the focused offer", "lease", "the focused offer, then the next ones "
             "(or your picks in order)", lambda: self.query_one(OffersPane).action_lease()),
            ("Tear down the selected lease", "teardown", "destroy it, confirmed by the "
             "provider", self.action_teardown),
            ("Search offers again", "search-offers", "every provider on the board",
             self.action_search_offers),
            ("Zoom the focused pane", "zoom", "the pane fills the screen; again for all panes",
             self.action_toggle_zoom),
            ("Choose the model", "models", "search the hub's GGUF repos; each quant's size and "
             "the largest one each offer holds", self.action_open_models),
            ("Copy endpoint", "copy-endpoint", "the run's OpenAI base URL and key, for your "
             "own tools", self.action_copy_endpoint),
            ("Open the engine's web UI", "web-ui", "in the browser, through the same local "
             "port, with the key", self.action_open_web_ui),
            ("Bench the served model", "", "tok/s, TTFT and $/Mtok at 1 and N concurrent "
             "streams; kept for the board", self.action_bench),
            ("Open a channel's log", "channels-open", "the selected channel in the Channels "
             "pane", self._open_channel),
            ("Replay an archive", "", "how to replay this run's datastream archive",
             self._say_replay),
            ("Switch theme", "toggle-theme", "mvp-dark / mvp-light (saved in the config)",
             self.action_toggle_theme),
            ("Show keys", "help", "every key with its id for [ui.keys]", self.action_help),
        ]
        for title, binding_id, help_text, callback in ours:
            key = f" ({self._key_of(binding_id)})" if binding_id else ""
            yield SystemCommand(f"{title}{key}", help_text, callback)
        yield from super().get_system_commands(screen)

    def _open_channel(self) -> None:
        channels = self.query_one(ChannelsPane)
        channels.focus()
        channels.action_open_log()

    def _say_replay(self) -> None:
        archive = self.config.settings.observability.datastream_frame_log
        text = (
            f"replay this run with: mvp-tui replay {archive}"
            if archive is not None
            else "set [observability] datastream_frame_log (or --datastream-frame-log) to "
            "archive a run; then: mvp-tui replay FILE"
        )
        self.notify(text, title="replay an archive", timeout=20, markup=False)

    # -- keys ----------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen(all_bindings(), dict(self.config.ui_keys)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that need an engine or a lease are shown dimmed until they make sense, those
        # of another mode hidden: the mode says which (tui/run_mode.py).
        if action == "mode":
            return self.mode.owns(str(parameters[0])) if parameters else False
        return self.mode.check_action(action, self)

    def action_filter(self) -> None:
        offers = self.query_one(OffersPane)
        offers.focus()
        offers.action_filter()

    def action_teardown(self) -> None:
        self.query_one(LeasesPane).focus()
        self.query_one(LeasesPane).action_teardown()

    def action_mode(self, name: str, *parameters: object) -> None:
        """A key of the mode's own (`mode('pause')`: a replay's): the mode does it."""
        if self.mode.owns(name):
            self.mode.act(name, parameters)
            self._update_summary()

    def action_toggle_theme(self) -> None:
        self.theme = "mvp-light" if self.theme == "mvp-dark" else "mvp-dark"

    # -- config write-back -----------------------------------------------------------------
    def _persist_theme(self, theme: object) -> None:
        name = getattr(theme, "name", None)
        path = self.config.file
        if path is None or not isinstance(name, str) or name == self.config.settings.ui.theme:
            return
        try:
            write_key(path, "ui", "theme", name)
        except OSError as exc:
            self.notify(
                f"could not save [ui] theme to {path}: {exc.strerror}",
                severity="warning",
                markup=False,
            )
