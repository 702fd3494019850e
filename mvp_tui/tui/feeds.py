"""What feeds the dashboard's panes: a run (`LiveFeed`), an archive played back
(`ReplayFeed`), or nothing (the bare shell: tests, screenshots).

A feed holds only the commands and the timers of its source; what the dashboard knows of
the run it folds from the events it is shown (`engine/run_status.py`), live or replayed.
The screen hands a feed what it may call back (`FeedHost`); a feed never imports the screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from textual.screen import Screen

from mvp_tui.config import Config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.events import EngineEvent
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.tui.replay_events import ArchiveEvents

if TYPE_CHECKING:  # the engine is loaded after the first frame (tui/dashboard.py)
    from mvp_tui.engine.session import RunSession

# How often a replay's position and steps are read back (4 Hz: its status line moves).
REPLAY_POLL_S = 0.25


class FeedHost(Protocol):
    """What a feed asks of the dashboard it feeds."""

    def update_summary(self) -> None: ...
    def refresh_board(self) -> None: ...
    def start_run(self) -> None: ...
    def route(self, event: EngineEvent) -> None: ...
    def reset_ledger(self) -> None: ...


class LiveFeed:
    """A run: its session's commands, its timers (the status bar's second, the board's
    refresh), and the run's start (the restart check, then the offer search)."""

    read_only = False

    def __init__(self, session: RunSession) -> None:
        self.session: RunSession | None = session
        self.hub: ChannelHub = session.hub

    def start(self, screen: Screen[Any], host: FeedHost, config: Config) -> None:
        screen.set_interval(1.0, host.update_summary)
        refresh = config.settings.ui.offers_refresh_secs
        if refresh:  # 0 or unset: never (r still searches)
            screen.set_interval(refresh, host.refresh_board)
        host.start_run()

    def describe(self) -> str | None:
        """The status bar's line when the run's figures are not what it shows (a replay)."""
        return None

    async def close(self) -> None:
        assert self.session is not None
        await self.session.close()


class ReplayFeed:
    """An archive played back, read-only (no provider exists to call): the run's steps read
    back from it (`tui/replay_events.py`) through the same port, and its own keys."""

    read_only = True
    session: RunSession | None = None

    def __init__(self, control: ReplayControl) -> None:
        self.control = control
        self.hub: ChannelHub = control.hub
        self._events = ArchiveEvents()  # the run's steps, from the start on

    def start(self, screen: Screen[Any], host: FeedHost, config: Config) -> None:
        screen.set_interval(REPLAY_POLL_S, host.update_summary)
        screen.set_interval(REPLAY_POLL_S, lambda: self.poll(host))
        screen.run_worker(self.control.feed(), name="replay", group="replay")

    def poll(self, host: FeedHost) -> None:
        """The run's steps, read back from the archive, through the same port."""
        restarted, steps = self._events.poll(self.control.hub)
        if restarted:  # seeking back: the money and status are the archive's from its start
            host.reset_ledger()
        for event in steps:
            host.route(event)

    def describe(self) -> str | None:
        return self.control.describe()

    def act(self, name: str, *parameters: object) -> None:
        """A replay key (`replay('pause')`, `replay('seek', -1)`, `replay('speed', 2.0)`)."""
        if name == "pause":
            self.control.toggle_pause()
        elif name == "seek" and parameters:
            self.control.seek_step(int(str(parameters[0])))
        elif name == "speed" and parameters:
            self.control.scale_speed(float(str(parameters[0])))

    async def close(self) -> None:
        """Nothing to stop: the archive's reader ends with the screen's workers."""


Feed = LiveFeed | ReplayFeed


def choose_feed(session: RunSession | None, replay: ReplayControl | None) -> Feed | None:
    """The one place that tells them apart: from what the dashboard was given."""
    if replay is not None:
        return ReplayFeed(replay)
    return LiveFeed(session) if session is not None else None
