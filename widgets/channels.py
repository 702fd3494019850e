"""The Channels pane: every datastream channel with its frame count, rate and last position.

It polls the hub (every `POLL_S`, and only reads a snapshot when `hub.version` moved, or
once a second while rates decay), never a message per frame. Enter opens the channel's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import DataTable

from mvp_tui.datastream import ChannelHub, ChannelStats, HubSnapshot
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.channel_log import ChannelLogScreen
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.table_caches import bound_render_caches

POLL_S = 0.2
CHANNEL_CHARS = 200  # a channel name longer than this is cut (names are checked to ≤ 128)
RATE_REFRESH_S = 1.0
_COLUMNS = (("channel", "channel"), ("frames", "frames"), ("rate", "rate"), ("last", "last"))


def rate_text(rate: float) -> str:
    return f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


class ChannelsPane(Pane):
    """Channels of the run's hub; `attach_hub` starts the polling."""

    TITLE = "Channels"
    EMPTY_TEXT = (
        "Datastream channels (bootstrap phases, node logs, weights) appear here with "
        "frame counts and rates once a node starts. Enter opens a channel's log."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_log", "open log", id="channels-open"),
    ]

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        id: str | None = "channels-pane",
    ) -> None:
        super().__init__(id=id)
        self.hub: ChannelHub | None = None
        self._clock = clock
        self._version = -1
        self._epoch = -1
        self._last_read = 0.0
        self._snapshot: HubSnapshot | None = None
        self._fitted_width = 0

    def compose_content(self) -> ComposeResult:
        yield DataTable(id="channels-table", cursor_type="row")

    def on_mount(self) -> None:
        table = self.table
        table.display = False
        bound_render_caches(table)  # a few cells change every second: hours of entries
        for label, key in _COLUMNS:
            table.add_column(Text(label, justify="left" if key == "channel" else "right"), key=key)
        self.set_interval(POLL_S, self.poll)

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#channels-table", DataTable)

    def focus_target(self) -> Widget | None:
        return self.table

    # -- the API the app uses ------------------------------------------------------------
    def attach_hub(self, hub: ChannelHub) -> None:
        """Show this hub's channels (the run's); polling starts at once."""
        self.hub = hub
        self._version = -1
        self.poll()

    def poll(self) -> None:
        """Read the hub when it changed (or rates may have decayed) and update the table."""
        hub = self.hub
        if hub is None or not self.screen.is_current:
            return  # nothing to show, or covered by a modal or the channel log
        now = self._clock()
        stale_rates = (
            self._snapshot is not None
            and now - self._last_read >= RATE_REFRESH_S
            and any(c.rate > 0 for c in self._snapshot.channels)
        )
        if hub.version == self._version and not stale_rates:
            return
        self._version, self._last_read = hub.version, now
        self.show(hub.snapshot())

    def show(self, snapshot: HubSnapshot) -> None:
        """Bring the table in line with `snapshot`, keyed by channel name."""
        table = self.table
        self._snapshot = snapshot
        with self.app.batch_update():
            if snapshot.epoch != self._epoch:
                self._epoch = snapshot.epoch
                table.clear()
            width = self._name_width()
            refit = width != self._fitted_width
            self._fitted_width = width
            for stats in snapshot.channels:
                cells = _cells(stats, width)
                if stats.channel in table.rows:
                    start = 0 if refit else 1
                    for (_, key), cell in zip(_COLUMNS[start:], cells[start:], strict=True):
                        table.update_cell(stats.channel, key, cell, update_width=refit)
                else:
                    table.add_row(*cells, key=stats.channel)
        has_rows = bool(snapshot.channels)
        table.display = has_rows
        self.set_empty(not has_rows)
        total = sum(c.count for c in snapshot.channels)
        count = len(snapshot.channels)
        channels = "channel" if count == 1 else "channels"
        frames = "frame" if total == 1 else "frames"
        self.border_subtitle = Text(f"{count} {channels} · {total:,} {frames}")
        self.refresh_bindings()

    def _name_width(self) -> int:
        return max(12, self.content_size.width - NUMBERS_WIDTH)

    def on_resize(self) -> None:
        if self._snapshot is not None and self._name_width() != self._fitted_width:
            self.show(self._snapshot)

    # -- keys ----------------------------------------------------------------------------
    def selected_channel(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return row_key.value

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_log":
            return True if self.selected_channel() else None
        return True

    def action_open_log(self) -> None:
        channel = self.selected_channel()
        if channel is not None and self.hub is not None:
            self.app.push_screen(ChannelLogScreen(self.hub, channel))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_log()


# Room the number columns take (frames, rate, last, with cell padding and the scrollbar).
NUMBERS_WIDTH = 24


def fit_name(name: str, width: int) -> str:
    """A channel name cut to `width`, keeping its meaningful tail in whole segments
    (`…bootstrap`, `mvp.…node.12.provider`) and its first segments when they fit: the
    counts beside it must stay on screen."""
    if len(name) <= width or width < 4:
        return name
    segments = name.split(".")
    tail = segments[-1]
    for segment in reversed(segments[:-1]):
        longer = f"{segment}.{tail}"
        if len(longer) + 1 > width:
            break
        tail = longer
    if len(tail) + 1 > width:  # even the last segment is too long: its end, cut
        return "…" + name[-(width - 1) :]
    room = width - 1 - len(tail)
    head = ""
    for segment in segments[: -tail.count(".") - 1]:  # whole leading segments that fit
        if len(head) + len(segment) + 1 > room:
            break
        head += f"{segment}."
    return f"{head}…{tail}"


def _cells(stats: ChannelStats, name_width: int = 10_000) -> list[Text]:
    return [
        Text(fit_name(clean_line(stats.channel, CHANNEL_CHARS), name_width), no_wrap=True),
        Text(f"{stats.count:,}", justify="right"),
        Text(rate_text(stats.rate), justify="right"),
        Text(f"{stats.last_position:,}", justify="right"),
    ]
