"""The Bootstrap pane: a checklist from lease running to a healthy engine, with timings.

Engine facts (lease, SSH, agent, stage budgets) arrive as `BootstrapStep` messages from the
engine port; node facts (the agent's phases and download progress, the weights) are read
from the hub (`attach_hub`), polled every `POLL_S` only when the hub changed: no message per
frame. Of the orchestrator's `mvp.orch.bootstrap` phases only those no event tells are read
(config, offers, teardown, the run's exit). It reads the same without colour: ✓ ● ○ ✗ and words.

Rows fit the pane: a narrow pane drops the timing column and takes a row's short form
(`Stage.compact`); a detail too long for its line wraps onto the lines the pane has spare,
a failure's first (its reason names the fix), and only what still does not fit is cut.
"""

from __future__ import annotations

import re
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import tzinfo
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from mvp_tui.datastream import MVP_ORCH_BOOTSTRAP, MVP_WORKER_WEIGHTS, ChannelHub
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.events import EngineEvent
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.bootstrap_model import BootstrapModel, Stage, Status
from mvp_tui.widgets.detail import DetailScreen, node_log_tail
from mvp_tui.widgets.facts import BootstrapStep
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.wait_spend import WaitSpend

POLL_S = 0.25
BAR_CELLS = 14
NAME_CELLS = 18  # at most: the column is as wide as the longest name (+2)
TIME_CELLS = 11
NARROW_CELLS = 52  # a pane narrower than this drops the timing column
NARROW_INDENT = 4  # where a wrapped detail goes on in a narrow pane
_AGENT_CHANNEL = re.compile(r"mvp\.node\.\d+\.agent")
_STATUS_CLASS = {
    Status.PENDING: "bootstrap--pending",
    Status.ACTIVE: "bootstrap--active",
    Status.DONE: "bootstrap--done",
    Status.FAILED: "bootstrap--failed",
    Status.SKIPPED: "bootstrap--skipped",
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
    COMPONENT_CLASSES: ClassVar[set[str]] = set(_STATUS_CLASS.values()) | {
        "bootstrap--time",
        "bootstrap--spend",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "detail", "full text", id="bootstrap-detail"),
    ]

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
        id: str | None = "bootstrap-pane",
        ledger: LeaseLedger | None = None,
    ) -> None:
        super().__init__(id=id)
        self.model = BootstrapModel(tz=tz)
        # The price of waiting, the checklist's last line: read from the app's ledger (the
        # engine feeds it), or from the pane's own when it stands alone.
        self.wait = WaitSpend(ledger)
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
    @on(BootstrapStep)
    def _step(self, message: BootstrapStep) -> None:
        self.handle_event(message.event)

    def handle_event(self, event: EngineEvent) -> None:
        changed = self.wait.handle(event)  # both see every event: no short-circuit
        if self.model.apply(event) or changed:
            self.render_list()

    def reset_money(self, ledger: LeaseLedger) -> None:
        """A fresh ledger (a replay sought back to its start)."""
        self.wait = WaitSpend(ledger)
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

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "detail":
            return True if self.model.started else None
        return True

    def action_detail(self) -> None:
        """Every row's whole text (a failure's reason uncut), and the node's last log lines
        when something failed, in a scrollable view (`y` copies)."""
        if not self.model.started:
            return
        text = self.model.full_text()
        if self.model.failed:
            logs = node_log_tail(self.hub)
            if logs:
                text += "\n\nThe node's last log lines:\n" + "\n".join(logs)
        lease = f" of lease {self.model.lease_id}" if self.model.lease_id else ""
        self.app.push_screen(DetailScreen(f"Bootstrap{lease}", text))

    # -- rendering -----------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self.render_list()

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

    def checklist_text(self, width: int | None = None, height: int | None = None) -> Text:
        """The rows laid out for `width` x `height` cells (default: the pane's content area;
        0 = unknown: one line per row, nothing wrapped)."""
        size = self.content_size
        width = size.width if width is None else width
        height = size.height if height is None else height
        now = self._clock()
        spend = self.wait.line(now)  # the price of waiting, or the summary at ready
        if spend and height:
            height = max(1, height - 1)
        layout = layout_rows(self.model.rows(), width, height)
        text = Text(no_wrap=True, overflow="ellipsis")
        if spend:  # first: in a short pane the last pending row is what gets cut, not this
            text.append(spend + "\n", style=self._style("bootstrap--spend"))
        if layout.folded:
            style = self._style(_STATUS_CLASS[Status.DONE])
            text.append(f"{Status.DONE.value} {folded_text(layout.folded, width - 2)}", style=style)
        for index, (stage, (indent, lines)) in enumerate(
            zip(layout.rows, layout.details, strict=True)
        ):
            if index or layout.folded:
                text.append("\n")
            text.append_text(self._row(stage, now, layout.name_cells, timed=layout.timed))
            text.append(lines[0])
            for more in lines[1:]:
                text.append("\n" + " " * indent + more)
        return text

    def _row(self, stage: Stage, now: float, name_cells: int, *, timed: bool) -> Text:
        style = self._style(_STATUS_CLASS[stage.status])
        row = Text()
        row.append(f"{stage.status.value} ", style=style)
        row.append(f"{stage.name:<{name_cells}}", style=style)
        if timed:
            row.append(time_cell(stage, now), style=self._style("bootstrap--time"))
        return row


def time_cell(stage: Stage, now: float) -> str:
    """The row's time: elapsed, and of its budget while it runs ("  4.2/240s")."""
    seconds = stage.seconds(now)
    if seconds is None or (seconds <= 0 and stage.status is not Status.ACTIVE):
        return " " * TIME_CELLS
    budget = stage.budget_s
    if budget is not None and stage.status is Status.ACTIVE:
        cell = f"{seconds:5.1f}/{budget:.0f}s"
        if len(cell) < TIME_CELLS:
            return f"{cell:<{TIME_CELLS}}"
    return f"{seconds:7.1f} s  "


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the rows go in the pane's cells."""

    folded: list[Stage]  # the first steps, all done, on one line (when lines are short)
    rows: list[Stage]  # the others, one line each plus their detail's wrapped lines
    name_cells: int
    timed: bool  # the timing column shows (not in a narrow pane)
    details: list[tuple[int, list[str]]]  # per row: (indent of wrapped lines, lines)
    failure_cut: bool  # a failure's reason does not fit whole


def layout_rows(rows: list[Stage], width: int, height: int) -> Layout:
    """Every row on its line when they fit; if not, the first steps done share one line.
    A failure's reason wraps onto the lines to spare; when they are too few, more of the
    steps done are folded to make room (the reason names the fix)."""
    finished = (Status.DONE, Status.SKIPPED)
    done = next((i for i, stage in enumerate(rows) if stage.status not in finished), len(rows))
    most = min(done, len(rows) - 1)  # a fold of one row into one line gains nothing
    if height <= 0 or len(rows) <= height:
        folds = [0, *range(2, most + 1)]
    else:
        folds = list(range(max(2, len(rows) - height + 1), most + 1)) or [0]
    layout = _lay(rows, folds[0], width, height)
    for fold in folds[1:]:
        if not layout.failure_cut:
            break
        layout = _lay(rows, fold, width, height)
    return layout


def folded_text(stages: list[Stage], cells: int) -> str:
    """The names of the steps folded on one line: all when they fit, else the first and
    the last with how many."""
    names = ", ".join(stage.name for stage in stages)
    if cells <= 0 or cell_len(names) <= cells:
        return names
    return f"{stages[0].name} … {stages[-1].name} ({len(stages)} done)"


def _lay(rows: list[Stage], fold: int, width: int, height: int) -> Layout:
    folded, shown = rows[:fold], rows[fold:]
    if fold and height > 0:
        height -= 1
    narrow = 0 < width < NARROW_CELLS
    name_cells = min(NAME_CELLS, max(len(stage.name) for stage in shown) + 2)
    lead = 2 + name_cells + (0 if narrow else TIME_CELLS)
    details, cut = _details(shown, width, lead, height)
    return Layout(folded, shown, name_cells, not narrow, details, cut)


def _details(
    rows: list[Stage], width: int, lead: int, height: int
) -> tuple[list[tuple[int, list[str]]], bool]:
    """Each row's detail as (indent, lines): the first line beside the row, the others below
    it, under the detail column or, when that takes too many lines, further left; and
    whether a failure's reason had to be cut."""
    full = [_detail(stage) for stage in rows]
    details = [(lead, [text]) for text in full]
    room = width - lead
    if not width or room <= 0:
        return details, False
    spare = max(0, height - len(rows)) if height > 0 else 0
    failure_cut = False
    # Failures first: their reason says what to do.
    order = sorted(range(len(rows)), key=lambda i: rows[i].status is not Status.FAILED)
    for i in order:
        stage, text = rows[i], full[i]
        if cell_len(text) <= room:
            continue
        indent = lead
        wrapped = _wrap(text, room, width - indent)
        if len(wrapped) - 1 > spare and lead > NARROW_INDENT:
            indent = NARROW_INDENT  # all of it below the row, from further left
            wrapped = _wrap(text, 0, width - indent)
        compact = _detail(stage, compact=True) if stage.compact else ""
        if len(wrapped) - 1 <= spare:
            details[i] = (indent, wrapped)
        elif compact and cell_len(compact) <= room:
            details[i] = (lead, [compact])
        else:
            failure_cut = failure_cut or stage.status is Status.FAILED
            if spare:
                cut = [*wrapped[:spare], " ".join(wrapped[spare:])]  # the last line is cut
                details[i] = (indent, cut)
        spare -= len(details[i][1]) - 1
    return details, failure_cut


def _detail(stage: Stage, *, compact: bool = False) -> str:
    """The row's detail, with its progress bar; the short form has neither bar nor sizes."""
    if compact:
        return stage.compact
    if stage.progress is not None:
        return f"{progress_bar(stage.progress)} {stage.detail}"
    return stage.detail


def _wrap(text: str, first: int, rest: int) -> list[str]:
    """`text` in lines: the first at most `first` cells (0: the first line stays empty), the
    others at most `rest`. A " · " stays with the part after it, so no line ends on one."""
    glued = text.replace(" · ", " ·\u00a0")  # textwrap breaks at ASCII whitespace only
    if first <= 0:
        lines = ["", *textwrap.wrap(glued, max(1, rest), break_on_hyphens=False)]
    else:
        lines = textwrap.wrap(glued, first, break_on_hyphens=False)
        if len(lines) > 1:
            tail = glued[len(lines[0]) :].strip()
            lines = [lines[0], *textwrap.wrap(tail, max(1, rest), break_on_hyphens=False)]
    return [line.replace("\u00a0", " ") for line in lines] or [""]
