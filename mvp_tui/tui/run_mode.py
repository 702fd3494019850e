"""What the dashboard is showing, as one object the app asks instead of testing which it is.

The panes are one set, composed once by the app (tui/app.py); a mode says what feeds them,
which of the app's actions make sense now, and what the status bar sums up:

- `ShellMode`: no engine (tests, screenshots): panes with what they are handed, no run.
- `LiveMode`: a run, through its `RunSession`: the run's own timers, the restart check and
  the offer search at start, the signals, and the stop when the dashboard closes.
- `ReplayMode`: `mvp-tui replay FILE`: the archive played into a hub, read-only, with the
  run's steps rebuilt from it (tui/replay_events.py) and its own keys (pause, seek, speed).

A mode's own keys are bound as `mode('name', ...)` (mvp_tui/keymap.py): the app hands them
to `act`, and a mode without that action hides them (`owns`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

from mvp_tui.config import Config
from mvp_tui.config.sections.prompt import PromptSection
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.controller import RunController, StopResult
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.session import EngineFactory, RunSession
from mvp_tui.lease.endpoint_record import EndpointRecord
from mvp_tui.lease.records import RecordStore
from mvp_tui.tui.exit_path import EXIT_SIGNALS
from mvp_tui.tui.offer_board import OfferBoard
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.tui.replay_events import ArchiveEvents
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.status_bar import RunSummary

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mvp_tui.tui.app import MvpApp

# The app's actions that only a run can do: a replay hides them (read-only), the shell
# shows them dimmed until there is a run.
RUN_ACTIONS = frozenset({"search_offers", "filter", "teardown"})


class ShellMode:
    """No engine: the panes show what they are handed (tests, `--help` screenshots); every
    other mode is this one plus what it adds."""

    session: RunSession | None = None

    def __init__(self, config: Config, hub: ChannelHub | None = None) -> None:
        self._hub = hub
        self._limits = Limits.from_config(config)  # the engine's, with a run (`limits`)
        self._prompt = config.settings.prompt
        self._provider = config.provider

    # -- what it is ---------------------------------------------------------------------
    @property
    def engine(self) -> RunEngine | None:
        """The engine of the provider being walked (None: no run)."""
        return None

    @property
    def controller(self) -> RunController | None:
        return None

    @property
    def hub(self) -> ChannelHub | None:
        return self._hub

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def prompt_settings(self) -> PromptSection:
        return self._prompt

    @property
    def provider_name(self) -> str:
        """The provider the Offers pane is titled with."""
        return self._provider

    @property
    def booked_as(self) -> str:
        """The provider the ledger books an event under ("": the events it is handed)."""
        return ""

    @property
    def busy(self) -> bool:
        """A lease is being made, brought up or torn down."""
        return False

    @property
    def leasing_open(self) -> bool:
        """A lease may be asked for (a run that is not closed)."""
        return False

    @property
    def holds_lease(self) -> bool:
        return False

    @property
    def endpoint(self) -> EndpointRecord | None:
        """The serving run's OpenAI endpoint."""
        return None

    def new_ledger(self) -> LeaseLedger:
        """The one fold of lease money: the app's own, for the events it is shown."""
        return LeaseLedger()

    def offer_board(self, config: Config, kinds: Sequence[str]) -> OfferBoard | None:
        """The board of every provider's offers: a run's (nothing to search without one)."""
        return None

    def redact(self, text: str) -> str:
        return text

    def run(self) -> RunSession:
        """The run, for what only a run does (the restart check, a walk, a web UI)."""
        raise AssertionError("no engine: the bare shell or a replay")

    # -- on the dashboard ---------------------------------------------------------------
    def start(self, app: MvpApp) -> None:
        """Once the panes are mounted: what feeds them."""
        hub = self.hub
        if hub is not None:
            app.query_one(BootstrapPane).attach_hub(hub)
            app.query_one(ChannelsPane).attach_hub(hub)

    async def close(self) -> None:
        """The dashboard is going away."""

    def summary(self, app: MvpApp) -> RunSummary:
        """The status bar's line: the run's figures, from the app's ledger."""
        ledger = app.ledger
        return RunSummary(
            run_id=self.run_id(app),
            provider=self.provider_name,
            profile=app.config.profile,
            live_leases=app.live_leases,
            price_per_hour=ledger.rate(),
            spent_usd=ledger.spent(app.wall()),
            cap_usd=self.limits.max_spend_usd,
            label=app.label,
            rate_trend=app.rate_trend(),
            volume_usd_per_month=ledger.volume_usd_per_month,
        )

    def run_id(self, app: MvpApp) -> str | None:
        return app.config.settings.runtime.run_id

    def check_action(self, action: str, app: MvpApp) -> bool | None:
        """Whether one of the app's actions makes sense now: True, None (shown dimmed) or
        False (hidden)."""
        if action in {"search_offers", "filter"}:
            return None  # no run yet
        if action in {"copy_endpoint", "open_web_ui"}:
            return True if self.endpoint is not None else None
        if action == "teardown":
            # A lease being brought up can be torn down too; one already ending cannot.
            return True if app.live_leases and not self.tearing_down else None
        return True

    @property
    def tearing_down(self) -> bool:
        return False

    def owns(self, name: str) -> bool:
        """A key bound as `mode('name', ...)` is this mode's (else it is hidden)."""
        return callable(getattr(self, f"action_{name}", None))

    def act(self, name: str, parameters: tuple[object, ...]) -> None:
        action: Callable[..., None] = getattr(self, f"action_{name}")
        action(*parameters)

    # -- what the run does for the app's keys and panes ---------------------------------
    def submit(self, text: str) -> int | None:
        """A prompt for the node; None: refused (nothing serves here)."""
        return None

    def cancel_prompt(self) -> None:
        """Nothing is answering here."""

    def new_conversation(self) -> None:
        """The pane's next prompt sends no earlier turn (no conversation here)."""

    def transcript_dir(self, app: MvpApp) -> Path:
        """Where ctrl+s saves the Prompt pane's transcript: the run's directory."""
        run_id = self.run_id(app)
        store = RecordStore(app.config.state_dir)
        return store.run_dir(run_id) if run_id else store.state_dir / "transcripts"

    def choose_model(self, repo: str, file: str) -> None:
        """The next lease serves this model (no engine to tell here)."""

    async def stop(self, reason: str) -> StopResult | None:
        """The run's teardown; None: there is no run."""
        return None

    async def exit_code_after_stop(self, app: App[int], *, destroy: bool, reason: str) -> int:
        """The run stopped before the app exits; the code it exits with. Nothing can bill
        here."""
        return 0 if destroy else 3

    def postpone_idle_stop(self, app: MvpApp) -> None:
        """A key while the node's idle stop warned: the node hears of it (no node here)."""


class LiveMode(ShellMode):
    """A run: the app talks to it only through its `RunSession`."""

    def __init__(self, session: RunSession, config: Config) -> None:
        super().__init__(config, session.hub)
        self.session: RunSession = session

    @property
    def engine(self) -> RunEngine | None:
        return self.session.engine

    @property
    def controller(self) -> RunController | None:
        return self.session.controller

    @property
    def hub(self) -> ChannelHub | None:
        return self.session.hub

    @property
    def limits(self) -> Limits:
        """Those of the engine of the moment (a provider switch reads its own)."""
        return self.session.limits

    @property
    def prompt_settings(self) -> PromptSection:
        return self.session.prompt_settings

    @property
    def provider_name(self) -> str:
        return self.session.provider_name

    @property
    def booked_as(self) -> str:
        return self.session.provider_name

    @property
    def busy(self) -> bool:
        return self.session.busy

    @property
    def leasing_open(self) -> bool:
        return not self.session.closed

    @property
    def holds_lease(self) -> bool:
        return self.session.holds_lease

    @property
    def endpoint(self) -> EndpointRecord | None:
        return self.session.endpoint

    @property
    def tearing_down(self) -> bool:
        return self.session.tearing_down

    def new_ledger(self) -> LeaseLedger:
        return self.session.ledger  # the engines feed it

    def offer_board(self, config: Config, kinds: Sequence[str]) -> OfferBoard | None:
        session = self.session
        return OfferBoard(
            config,
            own=lambda: session.provider_name,
            search_own=lambda: session.search_offers(),
            redactor=session.redactor,
            kinds=kinds,
            read_need=lambda: session.model_need(),
        )

    def redact(self, text: str) -> str:
        return self.session.redactor(text)

    def run(self) -> RunSession:
        return self.session

    def run_id(self, app: MvpApp) -> str | None:
        return self.session.run_id

    def start(self, app: MvpApp) -> None:
        super().start(app)
        app.set_interval(1.0, app.update_summary)
        refresh = app.config.settings.ui.offers_refresh_secs
        if refresh:  # 0 or unset: never (r still searches)
            app.set_interval(refresh, app.refresh_board)
        app.start_run()
        loop = asyncio.get_running_loop()
        for sig in EXIT_SIGNALS:
            loop.add_signal_handler(sig, app.exit_on_signal, sig)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in EXIT_SIGNALS:
            loop.remove_signal_handler(sig)
        session = self.session
        if session.stopped is None and session.holds_lease:
            # The app is going away without having stopped the run (a crash, a test's
            # shutdown): nothing may be left billing behind it.
            await session.stop(final=True, reason="the dashboard closed")
        await session.aclose()

    def check_action(self, action: str, app: MvpApp) -> bool | None:
        if action == "search_offers":
            return True if not self.busy else None
        if action == "filter":
            return True
        return super().check_action(action, app)

    def submit(self, text: str) -> int | None:
        return self.session.submit(text)

    def cancel_prompt(self) -> None:
        self.session.prompt_command("cancel")

    def new_conversation(self) -> None:
        self.session.prompt_command("new_conversation")

    def transcript_dir(self, app: MvpApp) -> Path:
        return self.session.run_dir

    def choose_model(self, repo: str, file: str) -> None:
        self.session.choose_model(repo, file)  # RunFailed: the app says why

    async def stop(self, reason: str) -> StopResult | None:
        return await self.session.stop(reason=reason)

    async def exit_code_after_stop(self, app: App[int], *, destroy: bool, reason: str) -> int:
        if destroy:
            app.notify("tearing down before quitting…", timeout=60, markup=False)
        # A walk in flight is cancelled by the stop: it destroys what it created, confirmed.
        result = await self.session.stop(destroy=destroy, final=True, reason=reason)
        return result.exit_code

    def postpone_idle_stop(self, app: MvpApp) -> None:
        app.run_worker(self.session.postpone_idle_stop(), name="postpone idle stop",
                       group="idle-stop", exit_on_error=False)


class ReplayMode(ShellMode):
    """An archive played back, read-only: no provider exists to call."""

    def __init__(self, config: Config, control: ReplayControl) -> None:
        super().__init__(config, control.hub)
        self.control = control
        self._events: ArchiveEvents | None = None  # the run's steps, from the start on
        self._app: MvpApp | None = None

    def start(self, app: MvpApp) -> None:
        super().start(app)
        for pane in app.query(Pane):
            pane.read_only = True
        self._app = app
        self._events = ArchiveEvents()
        app.set_interval(0.25, app.update_summary)
        app.set_interval(0.25, self.poll_archive)
        app.run_worker(self.control.feed(), name="replay", group="replay")

    def poll_archive(self) -> None:
        """The run's steps, read back from the archive, through the same port."""
        app, events = self._app, self._events
        if app is None or events is None:
            return
        restarted, steps = events.poll(self.control.hub)
        if restarted:  # seeking back: the money is the archive's from its start again
            app.reset_ledger()
        for event in steps:
            app.route(event)

    def summary(self, app: MvpApp) -> RunSummary:
        return RunSummary(replay=self.control.describe())

    def check_action(self, action: str, app: MvpApp) -> bool | None:
        if action in RUN_ACTIONS or action == "open_models":
            return False  # read-only (and nothing is served): hidden, not dimmed
        return super().check_action(action, app)

    # -- its keys (`mode('pause')`, ...) ------------------------------------------------
    def action_pause(self) -> None:
        self.control.toggle_pause()

    def action_seek(self, direction: int) -> None:
        self.control.seek_step(direction)

    def action_speed(self, factor: float) -> None:
        self.control.scale_speed(factor)


RunMode = ShellMode  # what the app holds: one of the three


def choose_mode(
    config: Config,
    *,
    engine: RunEngine | None,
    engine_for: EngineFactory | None,
    replay: ReplayControl | None,
    hub: ChannelHub | None,
) -> RunMode:
    """The one place that tells the three apart: from what the dashboard was given."""
    if replay is not None:
        return ReplayMode(config, replay)
    if engine is not None:
        # The run across providers (a pick from another provider's offers gets a fresh
        # engine of that provider from `engine_for`; None: only its own provider's offers).
        return LiveMode(RunSession(engine, engine_for), config)
    return ShellMode(config, hub)

