"""The dashboard's app: the theme, the keymap, help and the palette, the model picker, the
run's endpoint keys, and every way out (our `q`, Textual's ctrl+q and palette Quit,
`App.exit` from anywhere, a closed terminal, a kill), each asking first while something may
bill.

The panes are the one screen's (tui/dashboard_screen.py), fed by a run, a replay or nothing
(tui/feeds.py). What the app knows of the run is the status the engine port folds
(engine/run_status.py); it talks to the run only with its session's commands.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import RenderableType
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from mvp_tui.config import Config, ConfigError, ConfigPaths
from mvp_tui.config.toml_file import save_hub_model, write_key
from mvp_tui.config.values import Source
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.endpoint_words import endpoint_warnings, idle_stop_line
from mvp_tui.engine.events import EndpointReady, IdleStopNotice
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.ledger import LeaseLedger, money_text
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.run_status import RunStatus
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.errors import UserError
from mvp_tui.keymap import APP_BINDINGS, KeyBinding
from mvp_tui.lease.endpoint_record import EndpointRecord, load_endpoint
from mvp_tui.lease.records import RecordStore
from mvp_tui.providers.base import Offer
from mvp_tui.themes import APP_CSS_PATH, DARK_VARIABLES, THEMES
from mvp_tui.tui.bench_action import PALETTE_LEVEL_S, bench_live_run, palette_levels
from mvp_tui.tui.bindings import all_bindings
from mvp_tui.tui.board_wiring import WORK_GROUPS
from mvp_tui.tui.dashboard_screen import DashboardScreen
from mvp_tui.tui.endpoint_actions import (
    WEBUI_PAGE_KEPT_S,
    Opener,
    clipboard_text,
    default_opener,
    remove_login_page,
    web_ui_url,
)
from mvp_tui.tui.feeds import choose_feed
from mvp_tui.tui.model_catalog import HubCatalog
from mvp_tui.tui.offer_board import BOARD_PROVIDERS, OfferBoard
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.tui.terminal import HangupSafeDriver, terminal_gone
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from mvp_tui.widgets.facts import RunChanged
from mvp_tui.widgets.help_screen import HelpScreen, key_label
from mvp_tui.widgets.model_picker import ModelChoice, ModelPickerScreen
from mvp_tui.widgets.offers import OffersPane

if TYPE_CHECKING:
    from mvp_tui.engine.run import RunEngine
    from mvp_tui.engine.session import EngineFactory, RunSession

# A closed terminal (SIGHUP) or a kill (SIGTERM): nobody can be asked, so the run is stopped
# with its leases destroyed, confirmed, before the app exits.
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
PICKED = "the model picker"


def _binding(spec: KeyBinding) -> Binding:
    # Pane cycling and quitting must win over any focused widget's own use of the key.
    priority = spec.id in {"next-pane", "previous-pane", "interrupt"}
    # The dashboard's own keys run on its screen, whichever screen is on top (`dashboard.`,
    # an action namespace of this app); the others are the app's.
    name = spec.action.split("(", 1)[0]
    action = f"dashboard.{spec.action}" if hasattr(DashboardScreen, f"action_{name}") else (
        spec.action
    )
    return Binding(spec.keys, action, spec.description, show=spec.show, id=spec.id,
                   priority=priority)


def _served(config: Config) -> str:
    """The model served now, its file first (the quant is at the end of its name)."""
    source = config.model_source
    if source.local_path is not None:
        return f"local file {source.local_path}"
    return f"{source.file} ({source.repo})"


class MvpApp(App[int]):
    """The dashboard. Without an engine it is the bare shell (tests, `--help` screenshots)."""

    CSS_PATH = str(APP_CSS_PATH)
    TITLE = "mvp-tui"
    BINDINGS: ClassVar[list[BindingType]] = [_binding(spec) for spec in APP_BINDINGS]
    # The hub's endpoint (MVP_HF_ENDPOINT) and HF_TOKEN; tests point it at a fake hub.
    hub_environ: Mapping[str, str] = os.environ
    bench_level_s = PALETTE_LEVEL_S  # seconds per level of the palette's bench
    _exit_cleared = False  # set only on the paths that stopped the run first
    _quitting = False

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
        self._wall = wall
        # The run across providers (a pick from another provider's offers gets a fresh
        # engine of that provider from `engine_for`; None: only its own provider's offers).
        self.session: RunSession | None = None
        if engine is not None and replay is None:
            from mvp_tui.engine.session import RunSession

            self.session = RunSession(engine, engine_for)
        # What the app knows of the run, folded by the port from the events it routes;
        # seeded with the configuration's provider and limits until the run says its own.
        ledger = self.session.ledger if self.session is not None else LeaseLedger()
        self.status = RunStatus(config.provider, Limits.from_config(config), ledger,
                                run_id=config.settings.runtime.run_id)
        if self.session is not None:
            self.status.apply(self.session.said())  # its provider, from its engine
        # The engine's sink (the run's events come through it); the bare shell and a replay
        # have their own, for the events they are shown.
        self.port = sink if sink is not None else UiPort()
        self.feed = choose_feed(self.session, replay)
        self.hub = self.feed.hub if self.feed is not None else hub
        super().__init__()
        self._action_targets.add("dashboard")  # `dashboard.NAME`: the screen's keys
        for theme in THEMES:
            self.register_theme(theme)
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
        self._screen_parts = (hub, clock, wall, tz, label, board_kinds)
        self.dashboard: DashboardScreen  # made with the app's first screen (its context)
        self.web_opener: Opener = default_opener  # tests record the URL instead
        self._idle_warned = False  # the node's idle stop warned: the next key postpones it

    def get_default_screen(self) -> Screen[Any]:
        """The dashboard (as Posting's `MainScreen`): the panes, composed once."""
        hub, clock, wall, tz, label, kinds = self._screen_parts
        board = None
        if self.session is not None:
            session = self.session
            board = OfferBoard(self.config, own=lambda: self.status.provider_name,
                               search_own=session.search_offers,
                               redactor=session.engine.redactor, kinds=kinds,
                               read_need=lambda: session.engine.model_need())
        self.dashboard = DashboardScreen(self.config, self.status, self.port, self.feed,
                                         hub=hub, board=board, clock=clock, wall=wall, tz=tz,
                                         label=label)
        return self.dashboard

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual themes of its own lack our semantic variables: fall back to the dark values.
        return dict(DARK_VARIABLES)

    def compose(self) -> ComposeResult:
        yield from self.dashboard.panes()  # into the dashboard: ready with them in place

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._persist_theme)
        self.dashboard.start()  # what feeds the panes: the run, the archive, or nothing
        if self.session is not None:  # a run: a closed terminal or a kill stops it first
            loop = asyncio.get_running_loop()
            for sig in EXIT_SIGNALS:
                loop.add_signal_handler(sig, self.exit_on_signal, sig)

    async def on_unmount(self) -> None:
        if self.dashboard.board is not None:
            await self.dashboard.board.aclose()
        if self.session is not None:
            loop = asyncio.get_running_loop()
            for sig in EXIT_SIGNALS:
                loop.remove_signal_handler(sig)
        if self.feed is not None:
            # A run still holding a lease (a crash, a test's shutdown) is stopped first.
            await self.feed.close()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # One place for the run's failures: say what failed and the fix, never a traceback.
        worker = event.worker
        if worker.group not in WORK_GROUPS or event.state is not WorkerState.ERROR:
            return
        error = worker.error
        if isinstance(error, UserError):
            text = str(error)
            text = self.session.engine.redactor(text) if self.session is not None else text
        else:
            text = f"unexpected {type(error).__name__}: {error}"
        self.notify(clean_line(text, 600), title=f"{worker.name} failed", severity="error",
                    timeout=15, markup=False)

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The app's own keys; the dashboard's are asked of its screen (`dashboard.NAME`).
        if action == "open_models":
            return self.feed is None or not self.feed.read_only  # a replay serves nothing
        if action in {"copy_endpoint", "open_web_ui"}:  # a run's node serves (its key: later)
            return True if self.session is not None and self.status.endpoint else None
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen(all_bindings(), dict(self.config.ui_keys)))

    def action_toggle_theme(self) -> None:
        self.theme = "mvp-light" if self.theme == "mvp-dark" else "mvp-dark"

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

    def _key_of(self, binding_id: str) -> str:
        """The key a binding has now (a `[ui.keys]` remap applied), as a person reads it."""
        spec = next((b for b in all_bindings() if b.id == binding_id), None)
        keys = self.config.ui_keys.get(binding_id, spec.keys if spec is not None else "")
        return key_label(keys)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The app's own commands first, each with its key (as Posting shows them)."""
        dash = self.dashboard
        ours = [
            ("Lease the focused offer", "lease", "the focused offer, then the next ones "
             "(or your picks in order)", lambda: dash.query_one(OffersPane).action_lease()),
            ("Tear down the selected lease", "teardown", "destroy it, confirmed by the "
             "provider", dash.action_teardown),
            ("Search offers again", "search-offers", "every provider on the board",
             dash.action_search_offers),
            ("Zoom the focused pane", "zoom", "the pane fills the screen; again for all panes",
             dash.action_toggle_zoom),
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
        channels = self.dashboard.query_one(ChannelsPane)
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

    # -- the model picker: the next lease serves the choice (every provider's engine) -------
    def action_open_models(self) -> None:
        """The picker over the hub, against the offers on the board now."""
        screen = ModelPickerScreen(self.model_catalog(), save_key=self._key_of("picker-save"),
                                   back_key=self._key_of("picker-back"))
        self.push_screen(screen, self._model_chosen)

    def model_catalog(self) -> HubCatalog:
        from mvp_tui.engine.hub_models import HubModels
        from mvp_tui.engine.model_fit import fit_slots

        settings = self.config.settings
        return HubCatalog(
            HubModels(self.hub_environ),
            offers=self._board_offers,
            context=settings.model.max_context,
            nodes=settings.runtime.nodes,
            slots=fit_slots(settings.model.parallel),
            current=_served(self.config),
        )

    def _board_offers(self) -> list[Offer]:
        """The board's offers in the order it shows them (its sort and filter)."""
        model = self.dashboard.query_one(OffersPane).model
        return [o for key in model.view() if (o := model.offer(key)) is not None]

    def _model_chosen(self, choice: ModelChoice | None) -> None:
        if choice is None:
            return
        try:
            if self.session is not None:  # a run's engines serve it next
                self.session.choose_model(choice.repo, choice.file)
        except RunFailed as exc:
            self.notify(str(exc), title="model not changed", severity="warning",
                        timeout=15, markup=False)
            return
        before = self.config
        self.config = before.with_hub_model(choice.repo, choice.file, PICKED)
        said = f"the next lease serves {choice.repo}, file {choice.file}"
        if choice.save:
            said += "; " + self._save_model(choice, before.file, before.sources)
        self.notify(clean_line(said, 600), title=f"model: {clean_line(choice.quant, 24)}",
                    timeout=15, markup=False)
        if self.dashboard.board is not None:  # the board's fit is the new model's
            self.dashboard.board.model_changed()

    def _save_model(self, choice: ModelChoice, file: Path | None,
                    sources: Mapping[str, Source]) -> str:
        path = file or ConfigPaths().default
        try:
            return save_hub_model(path, choice.repo, choice.file, sources)
        except OSError as exc:
            return f"could not save [model] to {path}: {exc.strerror or exc}"

    # -- the run's OpenAI endpoint and the node's idle stop -------------------------------
    @on(RunChanged)
    def _say_endpoint(self, message: RunChanged) -> None:
        event = message.event
        if isinstance(event, EndpointReady):
            for warning in endpoint_warnings(event):
                self.notify(warning, title="OpenAI endpoint", severity="warning", timeout=20,
                            markup=False)
        if not isinstance(event, IdleStopNotice):
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

    def _endpoint(self) -> EndpointRecord | None:
        """The serving run's endpoint, with its key (read from the run's endpoint file, as
        `mvp-tui endpoint` does; no event carries the key). None: nothing serves (a replay
        shows a run's steps, never its key)."""
        if self.session is None or self.status.endpoint is None or self.status.run_id is None:
            return None
        record = load_endpoint(RecordStore(self.config.state_dir), self.status.run_id)
        return record if record is not None and record.serving else None

    def action_copy_endpoint(self) -> None:
        endpoint = self._endpoint()
        if endpoint is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        self.copy_to_clipboard(clipboard_text(endpoint))
        self.notify(f"copied OPENAI_BASE_URL ({endpoint.openai_base_url}) and OPENAI_API_KEY",
                    title="endpoint", markup=False)

    def action_open_web_ui(self) -> None:
        endpoint = self._endpoint()
        if endpoint is None or self.status.run_id is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        run_dir = RecordStore(self.config.state_dir).run_dir(self.status.run_id)
        try:
            url = web_ui_url(endpoint, run_dir)
        except (OSError, ValueError) as exc:
            self.notify(clean_line(str(exc), 300), title="web UI", severity="error",
                        markup=False)
            return
        self.web_opener(url)
        self.set_timer(WEBUI_PAGE_KEPT_S, lambda: remove_login_page(run_dir))
        self.notify(f"opening the engine's web UI on port {endpoint.port} (the node's own "
                    "pages, on a name of their own)", title="web UI", markup=False)

    def action_bench(self) -> None:
        """`mvp-tui bench` on the live run: one stream, then [prompt] concurrency (else 4)."""
        endpoint = self._endpoint()
        if endpoint is None or self.status.run_id is None:
            self.notify("the node is not serving yet", severity="warning", markup=False)
            return
        levels = palette_levels(self.config.settings.prompt.concurrency)
        self.notify(f"measuring the served model at {' then '.join(map(str, levels))} "
                    f"stream(s), {self.bench_level_s:g} s each", title="bench", markup=False)
        self.run_worker(self._bench(endpoint, self.status.run_id), name="bench", group="bench",
                        exclusive=True, exit_on_error=False)

    async def _bench(self, endpoint: EndpointRecord, run_id: str) -> None:
        outcome = await bench_live_run(endpoint, run_id, self.config.state_dir,
                                       self.config.settings.prompt.concurrency,
                                       self.bench_level_s)
        if not self.screen_stack:  # the app closed meanwhile
            return
        text = outcome.text
        text = self.session.engine.redactor(text) if self.session is not None else text
        self.push_screen(ConfirmScreen(outcome.title, text,
                                       [Choice("close", "Close", "primary")], focus="close",
                                       cancel_value="close"))

    def on_key(self) -> None:
        """A key while the idle stop warned: the node hears of it (it counts as use)."""
        if self._idle_warned:
            self._idle_warned = False
            if self.session is not None:
                self.run_worker(self.session.postpone_idle_stop(), name="postpone idle stop",
                                group="idle-stop", exit_on_error=False)

    # -- every way out -------------------------------------------------------------------
    def exit(
        self,
        result: int | None = None,
        return_code: int = 0,
        message: RenderableType | None = None,
    ) -> None:
        """Every exit — ours, Textual's ctrl+q, the palette's Quit, `App.exit` from anywhere —
        asks first while something may bill; only the answer's path really exits."""
        if self._exit_cleared or not self.status.holds_lease:
            super().exit(result, return_code, message)
            return
        self.action_quit_app()

    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q, the command palette's Quit): the same question as q."""
        self.action_quit_app()

    def _leave(self, return_code: int, message: str | None = None) -> None:
        self._exit_cleared = True
        super().exit(return_code, return_code, message)

    def action_quit_app(self) -> None:
        if not self.status.holds_lease:
            self._leave(0)
            return
        if self._quitting:
            return
        self._quitting = True
        ledger = self.status.ledger
        what = f"{ledger.live} lease(s)" if ledger.live else "A lease in progress"
        if ledger.rate():  # the ledger's figures: the ones the header shows
            now = self._wall()
            what += f" (${ledger.rate():.2f}/h, {money_text(ledger.spent(now))} so far)"
        self.push_screen(
            ConfirmScreen(
                "Quit with leases live?",
                f"{what} may be billing. Destroy them (confirmed by the provider), keep them "
                "running (see `mvp-tui ls` / `mvp-tui down`), or cancel.",
                [
                    Choice("cancel", "Cancel"),
                    Choice("keep", "Keep running", "warning"),
                    Choice("destroy", "Destroy and quit", "error"),
                ],
                focus="destroy",
                cancel_value="cancel",
            ),
            self._on_quit_choice,
        )

    def _on_quit_choice(self, choice: str | None) -> None:
        self._quitting = False
        if choice == "keep":
            self._stop_and_exit(destroy=False, reason="quit, leases kept")
        elif choice == "destroy":
            self._stop_and_exit(destroy=True, reason="quit")

    def exit_on_signal(self, sig: signal.Signals) -> None:
        # Nobody can be asked (a closed terminal, a kill): destroy, confirmed, then exit.
        if sig == signal.SIGHUP:
            terminal_gone()  # no write to the dead terminal may hold up the exit
        self._stop_and_exit(destroy=True, reason=f"{sig.name} received")

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this platform; on Linux the one that survives a hang-up."""
        driver = super().get_driver_class()
        return HangupSafeDriver if driver is LinuxDriver else driver

    @work(group="engine", name="teardown on quit", exit_on_error=False)
    async def _stop_and_exit(self, *, destroy: bool, reason: str) -> None:
        """The run stopped before the app exits, with the code it exits with (nothing can
        bill without a run)."""
        if self.session is None:
            self._leave(0 if destroy else 3)
            return
        if destroy:
            self.notify("tearing down before quitting…", timeout=60, markup=False)
        # A walk in flight is cancelled by the stop: it destroys what it created, confirmed.
        result = await self.session.stop(destroy=destroy, final=True, reason=reason)
        self._leave(result.exit_code)
