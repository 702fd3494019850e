"""One channel's log, full screen: batched writes from the hub, follow mode like Toolong.

Every ~100 ms the screen asks the hub for what is new on its channel (`tail`) and writes it
in one `write_lines` call; nothing is sent per frame. Scrolling up pauses following: the view
stays put and a "+N new" badge counts what arrives; `f` or End (or scrolling back to the
bottom) resumes. Text goes through `display_text`: sanitised, one line, never markup.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from mvp_tui.datastream import ChannelHub, display_text
from mvp_tui.untrusted import clean_line

FLUSH_EVERY_S = 0.1
MAX_LINES = 5000
FLUSH_LINES = 1000  # at most this many new lines per batch; older ones are counted as skipped
LINE_CHARS = 2000
NAME_CHARS = 200


class FollowLog(Log):
    """A Log that tells its screen when the user scrolls away from the end or back to it."""

    class ScrolledAway(Message):
        """The user scrolled up: stop following."""

    class ScrolledToEnd(Message):
        """The user went back to the end: follow again."""

    def _away(self) -> None:
        self.post_message(self.ScrolledAway())

    def _maybe_end(self) -> None:
        if self.scroll_target_y >= self.max_scroll_y:
            self.post_message(self.ScrolledToEnd())

    def action_scroll_up(self) -> None:
        super().action_scroll_up()
        self._away()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._away()

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._away()

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self._maybe_end()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._maybe_end()

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        self.post_message(self.ScrolledToEnd())

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._away()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._maybe_end()


class ChannelLogScreen(Screen[None]):
    """The log of `channel` on `hub`; Esc goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back", id="channel-log-back"),
        Binding("f", "follow", "follow", id="channel-log-follow"),
        Binding("y", "copy", "copy", id="channel-log-copy"),
    ]

    def __init__(self, hub: ChannelHub, channel: str, *, max_lines: int = MAX_LINES) -> None:
        super().__init__()
        self.hub = hub
        self.channel = channel
        self.max_lines = max_lines
        self.following = True
        self.position = -1  # last position written to the log
        self.pending = 0  # frames after `position` while paused
        self.written = 0  # frames written
        self.skipped = 0  # frames that left the hub's ring before they could be shown
        self._version = -1
        self._epoch = hub.epoch

    def compose(self) -> ComposeResult:
        with Horizontal(id="channel-log-head"):
            yield Static(Text(clean_line(self.channel, NAME_CHARS)), id="channel-log-name")
            yield Static(id="channel-log-state")
        yield FollowLog(max_lines=self.max_lines, auto_scroll=False, id="channel-log")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(FollowLog).focus()
        self.flush()
        self.set_interval(FLUSH_EVERY_S, self.flush)

    @property
    def log_widget(self) -> FollowLog:
        return self.query_one(FollowLog)

    # -- the batch ------------------------------------------------------------------------
    def flush(self) -> None:
        """Write what is new on the channel in one batch (or count it while paused)."""
        hub = self.hub
        if hub.version == self._version:
            return
        self._version = hub.version
        if hub.epoch != self._epoch:  # the hub was reset (a replay seeked back)
            self._epoch = hub.epoch
            self.position, self.pending = -1, 0
            self.log_widget.clear()
        if self.following:
            self._write_new()
        else:
            stats = hub.snapshot().get(self.channel)
            self.pending = max(0, (stats.last_position if stats else -1) - self.position)
        self._show_state()

    def _write_new(self) -> None:
        tail = self.hub.tail(self.channel, self.position, limit=min(self.max_lines, FLUSH_LINES))
        lines = [display_text(frame, LINE_CHARS) for frame in tail.frames]
        if tail.dropped:
            self.skipped += tail.dropped
            lines.insert(0, f"… {tail.dropped:,} frame(s) not shown: they left the buffer")
        if lines:
            log = self.log_widget
            log.write_lines(lines, scroll_end=False)
            log.scroll_end(animate=False, immediate=True, x_axis=False)
            self.written += len(tail.frames)
        if tail.last_position >= 0:
            self.position = tail.last_position
        self.pending = 0

    def _show_state(self) -> None:
        state = self.query_one("#channel-log-state", Static)
        if self.following:
            state.update(Text(f"following · {self.written:,} shown"))
            state.set_class(False, "-paused")
        else:
            badge = f"+{self.pending:,} new · " if self.pending else ""
            state.update(Text(f"paused · {badge}f / End to follow"))
            state.set_class(True, "-paused")
        self.set_class(self.following, "-following")

    # -- follow mode -----------------------------------------------------------------------
    def on_follow_log_scrolled_away(self, event: FollowLog.ScrolledAway) -> None:
        event.stop()
        if self.following:
            self.following = False
            self._show_state()

    def on_follow_log_scrolled_to_end(self, event: FollowLog.ScrolledToEnd) -> None:
        event.stop()
        self.action_follow()

    def action_follow(self) -> None:
        if not self.following:
            self.following = True
            self._version = -1
            self.flush()
        self.log_widget.scroll_end(animate=False, immediate=True, x_axis=False)

    def action_copy(self) -> None:
        """The log's lines (cleaned, as shown) to the clipboard."""
        self.app.copy_to_clipboard("\n".join(self.log_widget.lines))
        self.app.notify("log copied to the clipboard", timeout=3, markup=False)

    def action_back(self) -> None:
        self.dismiss(None)
