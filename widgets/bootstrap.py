"""The Bootstrap pane: a checklist from lease running to a healthy engine, with timings.

SSH and lease events arrive through `handle_event`; the node's phases and download progress
are read from the hub (`attach_hub`), polled every `POLL_S` only when the hub changed: no
message per frame. It reads the same without colour: ✓ ● ○ ✗ and words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from mvp_tui.datastream import MVP_ORCH_BOOTSTRAP, MVP_WORKER_WEIGHTS, ChannelHub
from mvp_tui.events import EngineEvent
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.bootstrap_model import BootstrapModel, Stage, Status
from mvp_tui.widgets.pane import Pane

POLL_S = 0.25
BAR_CELLS = 14
NAME_CELLS = 18
_AGENT_CHANNEL = re.compile(r"mvp\.node\.\d+\.agent")
_STATUS_CLASS = {
    Status.PENDING: "bootstrap--pending",
    Status.ACTIVE: "bootstrap--active",
    Status.DONE: "bootstrap--done",
    Status.FAILED: "bootstrap--failed",
}


def progress_bar(fraction: float, cells: int = BAR_CELLS) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * cells)
    return "█" * filled + "░" * (cells - filled) + f" {fraction * 100:3.0f}%"


class BootstrapPane(Pane):
    """The current lease's stages; `attach_hub` adds the node's own reports."""

    TITLE = "Bootstrap"
    EMPTY_TEXT = (
        "Once a lease runs: SSH attempts with their back-off, the node agent starting, "
        "the model loading and the engine's health. Nothing to bootstrap yet."
    )
    COMPONENT_CLASSES: ClassVar[set[str]] = set(_STATUS_CLASS.values()) | {"bootstrap--time"}

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        id: str | None = "bootstrap-pane",
    ) -> None:
        super().__init__(id=id)
        self.model = BootstrapModel()
        self.hub: ChannelHub | None = None
        self._clock = clock
        self._version = -1
        self._epoch = -1
        self._positions: dict[str, int] = {}

    def compose_content(self) -> ComposeResult:
        yield Static(id="bootstrap-list")

    def on_mount(self) -> None:
        self.query_one("#bootstrap-list").display = False
        self.set_interval(POLL_S, self.poll)
        self.set_interval(1.0, self._tick)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.render_list())

    # -- the API the app uses ------------------------------------------------------------
    def handle_event(self, event: EngineEvent) -> None:
        if self.model.apply(event):
            self.render_list()

    def attach_hub(self, hub: ChannelHub) -> None:
        """Read bootstrap phases, agent progress and weights frames from this hub."""
        self.hub = hub
        self._version, self._positions = -1, {}
        self.poll()

    def poll(self) -> None:
        """Fold new records from the hub into the checklist (only when the hub changed)."""
        hub = self.hub
        if hub is None or hub.version == self._version:
            return
        self._version = hub.version
        if hub.epoch != self._epoch:
            self._epoch, self._positions = hub.epoch, {}
        changed = False
        now = self._clock()
        for channel in self._channels(hub):
            tail = hub.tail(channel, self._positions.get(channel, -1))
            for frame in tail.frames:
                changed |= self.model.record(channel, frame.payload, now)
            if tail.last_position >= 0:
                self._positions[channel] = tail.last_position
        if changed:
            self.render_list()

    def _channels(self, hub: ChannelHub) -> list[str]:
        fixed = [c for c in (MVP_ORCH_BOOTSTRAP, MVP_WORKER_WEIGHTS) if hub.has_channel(c)]
        return fixed + [c for c in hub.channels() if _AGENT_CHANNEL.fullmatch(c)]

    # -- rendering -----------------------------------------------------------------------
    def _tick(self) -> None:
        if any(stage.status is Status.ACTIVE for stage in self.model.rows()):
            self.render_list()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name)

    def render_list(self) -> None:
        started = self.model.started
        self.set_empty(not started)
        body = self.query_one("#bootstrap-list", Static)
        body.display = started
        lease_id = self.model.lease_id
        self.border_subtitle = Text(f"lease {clean_line(lease_id, 40)}") if lease_id else ""
        if started:
            body.update(self.checklist_text())

    def checklist_text(self) -> Text:
        now = self._clock()
        text = Text(no_wrap=True, overflow="ellipsis")
        for index, stage in enumerate(self.model.rows()):
            if index:
                text.append("\n")
            text.append_text(self._row(stage, now))
        return text

    def _row(self, stage: Stage, now: float) -> Text:
        style = self._style(_STATUS_CLASS[stage.status])
        row = Text()
        row.append(f"{stage.status.value} ", style=style)
        row.append(f"{stage.name:<{NAME_CELLS}}", style=style)
        seconds = stage.seconds(now)
        timed = seconds is not None and (seconds > 0 or stage.status is Status.ACTIVE)
        row.append(
            f"{seconds:7.1f} s  " if timed else " " * 11, style=self._style("bootstrap--time")
        )
        if stage.progress is not None:
            row.append(progress_bar(stage.progress) + " ")
        row.append(stage.detail)
        return row
