"""The Leases pane: each create attempt and its answer, then every lease with uptime and spend.

Fed by `handle_event` (lease-walk events and the node switch's `NodeWatchdog`; others are
ignored). Uptime and spend tick every second from the events' times and an injectable clock;
`ctrl+d` on the selected lease asks (focus on Cancel) and then posts `TeardownRequested`.

Each lease row ends with its node's dead-man's switch ("switch armed · ends 14:32", "switch
FAILED", "its node destroyed it (deadline)"). A pane too narrow for that column shows the
same words on a line per lease below the table instead, so nothing is cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import tzinfo
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from mvp_tui.engine.ledger import LeaseLedger, money_text
from mvp_tui.events import EngineEvent
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.facts import LeaseChanged
from mvp_tui.widgets.leases_model import (
    LeaseDisplayState,
    LeasesModel,
    LeaseView,
    Tone,
    clock_text,
    switch_text,
    uptime_text,
)
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.table_caches import bound_render_caches

# The live mark ("▶", or "·") leads the lease cell: a column of its own cost two cells of
# padding, which a ~58-cell pane (100x30) cannot spare beside a 4-decimal spend.
LEASE_COLUMNS = ("lease", "GPU", "state", "uptime", "$/h", "spend")
# What a pane too narrow for every column gives up first: never the lease or its money, and
# never a horizontal scrollbar that hides the spend (a tagged lease id, "7001 (rehearsal)",
# once pushed it off a 100x30 screen behind a one-glyph scrollbar).
DROP_ORDER = ("uptime", "GPU", "state")
SWITCH_COLUMN = "switch"
PRICE_RISE_TOLERANCE = 0.001  # a quote this close to the leased price is the same price
TABLE_ROWS = 8  # the table's max-height (app.tcss): more rows bring a scrollbar
SCROLLBAR_CELLS = 2
_STATE_CLASS = {
    LeaseDisplayState.PENDING: "leases--pending",
    LeaseDisplayState.RUNNING: "leases--live",
    LeaseDisplayState.NOT_READY: "leases--fail",
    LeaseDisplayState.DELETING: "leases--pending",
    LeaseDisplayState.DELETED: "leases--muted",
    LeaseDisplayState.UNCONFIRMED: "leases--fail",
    LeaseDisplayState.NODE_DESTROYED: "leases--warn",
    LeaseDisplayState.NODE_ENDED: "leases--warn",
}
_TONE_CLASS = {
    Tone.PLAIN: "",
    Tone.PENDING: "leases--pending",
    Tone.OK: "leases--ok",
    Tone.WARN: "leases--warn",
    Tone.FAIL: "leases--fail",
    Tone.MUTED: "leases--muted",
}


class LeasesPane(Pane):
    """Attempts as they happen, then the run's leases; the selected one can be torn down."""

    TITLE = "Leases"
    EMPTY_TEXT = (
        "Each lease attempt appears here as it happens (created, unavailable, adopted, "
        "deleted), then every live lease with its uptime and spend. Pick an offer and "
        "press Enter to start."
    )
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "leases--ok",
        "leases--warn",
        "leases--fail",
        "leases--pending",
        "leases--muted",
        "leases--live",
        "leases--spend",
        "leases--time",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+d", "teardown", "teardown", id="teardown"),
        Binding("enter", "detail", "full text", id="leases-detail"),
    ]

    class TeardownRequested(Message):
        """Destroy this lease (the user confirmed)."""

        def __init__(self, provider_id: str) -> None:
            super().__init__()
            self.provider_id = provider_id

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
        id: str | None = "leases-pane",
        tag: str = "",
        ledger: LeaseLedger | None = None,
    ) -> None:
        super().__init__(id=id)
        self.tag = tag  # on every lease row ("rehearsal": nobody takes it for a real rental)
        # The money: the app's ledger (the engine feeds it), or the pane's own (on its own).
        self._ledger = ledger
        self.model = self._new_model(tz)
        self._clock = clock
        self._tz = tz
        self._shown: frozenset[str] = frozenset()
        self._columns: tuple[str, ...] = ()

    def compose_content(self) -> ComposeResult:
        with VerticalScroll(id="leases-history"):
            yield Static(id="leases-lines")
        yield DataTable(id="leases-table", cursor_type="row", show_header=False)
        yield Static(id="leases-switch")

    def on_mount(self) -> None:
        self.query_one("#leases-history").display = False
        self.query_one("#leases-switch").display = False
        table = self.table
        table.display = False
        bound_render_caches(table)  # a few cells change every second: hours of entries
        self._set_columns(LEASE_COLUMNS)
        self.query_one("#leases-history", VerticalScroll).anchor()
        self.set_interval(1.0, self.tick)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._render_all())

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#leases-table", DataTable)

    def focus_target(self) -> Widget | None:
        return self.table

    # -- the API the app uses ------------------------------------------------------------
    @on(LeaseChanged)
    def _changed(self, message: LeaseChanged) -> None:
        self.handle_event(message.event)

    def handle_event(self, event: EngineEvent) -> None:
        if self.model.apply(event):
            self._render_all()

    def _new_model(self, tz: tzinfo | None) -> LeasesModel:
        if self._ledger is None:
            return LeasesModel(tz=tz)
        return LeasesModel(tz=tz, ledger=self._ledger, feeds_ledger=False)

    def reset(self, ledger: LeaseLedger | None = None) -> None:
        """Forget every line and lease (a replay sought back to its start: `ledger`, the
        app's fresh one)."""
        self._ledger = ledger if ledger is not None else self._ledger
        self.model = self._new_model(self._tz)
        self._render_all()

    def set_current_price(self, provider_id: str, now: float, leased_at: float) -> bool:
        """The provider's current $/h for a live lease; True the first time a rise to this
        price is seen (the app then says it once), and the row shows the badge."""
        lease = self.model.leases.get(provider_id)
        if lease is None:
            return False
        rise = now > leased_at * (1 + PRICE_RISE_TOLERANCE)
        shown = now if rise else None
        if shown == lease.current_price:
            return False
        lease.current_price = shown
        self._render_leases()
        return rise

    def set_in_stock(self, provider_id: str, in_stock: bool) -> bool:
        """Whether the board still lists this lease's GPU type (to re-lease it); True the
        first time it is seen gone (the app then says it once), and the row shows it."""
        lease = self.model.leases.get(provider_id)
        if lease is None or lease.out_of_stock == (not in_stock):
            return False
        lease.out_of_stock = not in_stock
        self._render_leases()
        return lease.out_of_stock

    def tick(self) -> None:
        """Advance uptime and spend of leases that may still bill (every second)."""
        now = self._clock()
        for lease in self.model.leases.values():
            if lease.state.may_bill and lease.provider_id in self._shown:
                if "uptime" in self._columns:  # a narrow pane dropped it (DROP_ORDER)
                    self.table.update_cell(lease.provider_id, "uptime", self._uptime(lease, now))
                self.table.update_cell(lease.provider_id, "spend", self._spend(lease, now))

    def selected(self) -> LeaseView | None:
        table = self.table
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self.model.leases.get(row_key.value or "")

    # -- rendering -----------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._render_leases()  # the switch: a column when it fits, else lines below

    def _style(self, name: str) -> Style | str:
        if not name:
            return ""
        # Colour and weight without the pane's background, so a table cell keeps its row's
        # (the cursor's highlight) instead of painting the pane's over it.
        full = self.get_component_rich_style(name)
        return Style(color=full.color, bold=full.bold, italic=full.italic, dim=full.dim)

    def _render_all(self) -> None:
        has_lines = bool(self.model.history)
        self.set_empty(not has_lines and not self.model.leases)
        history = self.query_one("#leases-history", VerticalScroll)
        history.display = has_lines
        self.query_one("#leases-lines", Static).update(self._history_text())
        self._render_leases()

    def _history_text(self) -> Text:
        text = Text()
        time_style = self._style("leases--time")
        for index, line in enumerate(self.model.history):
            if index:
                text.append("\n")
            text.append(clock_text(line.at, self._tz), style=time_style)
            for part, tone in line.parts:
                text.append("  " if part[:1] != "→" else " ")
                text.append(part, style=self._style(_TONE_CLASS[tone]))
        return text

    def _render_leases(self) -> None:
        table = self.table
        selected = self.selected()
        now = self._clock()
        leases = list(self.model.leases.values())
        rows = [self._cells(lease, now) for lease in leases]
        switches = [self._switch(lease, now) for lease in leases]
        told = any(switch.plain for switch in switches)  # else no column, no lines
        every = (*LEASE_COLUMNS, SWITCH_COLUMN)
        full = [[*c, w] for c, w in zip(rows, switches, strict=True)]
        column = told and self._fits(full, every)
        shown = every if column else self._columns_that_fit(full)
        picks = [every.index(name) for name in shown]
        with self.app.batch_update():
            self._set_columns(shown)
            table.clear()
            for lease, cells in zip(leases, full, strict=True):
                # Auto height: Textual then drops the cells it drew before measuring the new
                # columns (else a changed column set keeps its label-wide cells: "700  RTX").
                table.add_row(*(cells[i] for i in picks), key=lease.provider_id, height=None)
            if selected is not None and selected.provider_id in self.model.leases:
                table.move_cursor(row=table.get_row_index(selected.provider_id), animate=False)
            below = told and not column
            self._render_switch_lines(list(zip(leases, switches, strict=True)) if below else [])
        self._shown = frozenset(self.model.leases)
        table.display = bool(self.model.leases)
        self.refresh_bindings()

    def _set_columns(self, columns: tuple[str, ...]) -> None:
        if columns == self._columns:
            return
        table = self.table
        table.clear(columns=True)
        for name in columns:
            table.add_column(name, key=name)
        self._columns = columns
        # Columns are chosen to fit (the switch only when it fits, the others dropped in
        # DROP_ORDER); a resize that makes the table overflow for a moment (until
        # `on_resize` chooses again) must not leave a scrollbar. Scrolling comes back, once
        # the table has measured itself, only where even the fewest columns overflow.
        if columns != LEASE_COLUMNS:
            self.add_class("-fitted")
        else:
            table.call_after_refresh(self._fitted_class)

    def _fitted_class(self) -> None:
        self.set_class(self._columns != LEASE_COLUMNS, "-fitted")

    def _columns_that_fit(self, rows: list[list[Text]]) -> tuple[str, ...]:
        """The lease columns less the fewest of DROP_ORDER that make the table fit (all of
        them before the pane is laid out; the fewest where nothing fits)."""
        columns: tuple[str, ...] = LEASE_COLUMNS
        if not self.content_size.width:
            return columns
        for name in DROP_ORDER:
            if self._fits(rows, columns):
                return columns
            columns = tuple(c for c in columns if c != name)
        return columns

    def _fits(self, rows: list[list[Text]], columns: tuple[str, ...]) -> bool:
        """Whether the table with these columns of these cells (one per column of LEASE_COLUMNS
        and the switch) fits the pane's width."""
        width = self.content_size.width
        if not width:
            return False  # not laid out yet: lines below for now, a column once it is
        if not rows:
            return True
        every = (*LEASE_COLUMNS, SWITCH_COLUMN)
        pad = 2 * self.table.cell_padding
        needed = sum(
            pad + max(cell_len(name), *(cell_len(row[every.index(name)].plain) for row in rows))
            for name in columns
        )
        return needed + (SCROLLBAR_CELLS if len(rows) > TABLE_ROWS else 0) <= width

    def _render_switch_lines(self, rows: list[tuple[LeaseView, Text]]) -> None:
        """The switch of each lease that has one to tell, below the table (narrow panes)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        for lease, switch in rows:
            if not switch.plain:
                continue
            if text.plain:
                text.append("\n")
            text.append(f"{lease.provider_id}  ")
            text.append_text(switch)
        lines = self.query_one("#leases-switch", Static)
        lines.update(text)
        lines.display = bool(text.plain)
        self.set_class(bool(text.plain), "-switch-below")

    def _switch(self, lease: LeaseView, now: float) -> Text:
        words, tone = switch_text(lease, self._tz, now)
        return Text(words, style=self._style(_TONE_CLASS[tone]))

    def _cells(self, lease: LeaseView, now: float) -> list[Text]:
        state_style = self._style(_STATE_CLASS[lease.state])
        live = lease.state is LeaseDisplayState.RUNNING
        name = f"{lease.provider_id} ({self.tag})" if self.tag else lease.provider_id
        return [
            Text.assemble(("▶" if live else "·", state_style), " ", name),
            Text(lease.gpu),
            Text(lease.state.value, style=state_style),
            self._uptime(lease, now),
            self._price(lease, now),
            self._spend(lease, now),
        ]

    def _price(self, lease: LeaseView, now: float) -> Text:
        money = self.model.money(lease, now)
        rate = money.price_per_hour if money is not None else 0.0
        text = Text(f"${rate:.2f}/h", justify="right")
        if lease.current_price is not None:  # the provider quotes more now: a badge
            text.append(f" ↑${lease.current_price:.2f}", style=self._style("leases--warn"))
        if lease.out_of_stock:  # no offer of its GPU type is left to re-lease
            text.append(" no stock", style=self._style("leases--warn"))
        return text

    def _uptime(self, lease: LeaseView, now: float) -> Text:
        money = self.model.money(lease, now)
        return Text(uptime_text(money.uptime_s if money else 0.0), justify="right")

    def _spend(self, lease: LeaseView, now: float) -> Text:
        money = self.model.money(lease, now)
        spend = money_text(money.spend_usd if money is not None else 0.0)
        return Text(spend, style=self._style("leases--spend"), justify="right")

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "teardown" and self.read_only:
            return False
        if action == "teardown":
            lease = self.selected()
            return True if lease is not None and lease.state.may_bill else None
        return True

    def action_detail(self) -> None:
        """The selected lease's history lines uncut (every line when none is selected), in
        a scrollable view; `y` copies."""
        lease = self.selected()
        text = self.model.full_text(lease.provider_id if lease is not None else None)
        if not text:
            text = self.model.full_text()
        if not text:
            return
        title = f"Lease {lease.provider_id}" if lease is not None else "Lease attempts"
        self.app.push_screen(DetailScreen(title, text))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on a lease row: the DataTable selects it; the detail view opens.
        event.stop()
        self.action_detail()

    def action_teardown(self) -> None:
        lease = self.selected()
        if lease is None or not lease.state.may_bill:
            return
        provider_id = lease.provider_id
        money = self.model.money(lease, self._clock())
        rate, spend = (money.price_per_hour, money.spend_usd) if money else (0.0, 0.0)
        self.app.push_screen(
            ConfirmScreen(
                f"Tear down lease {provider_id}?",
                f"{lease.gpu or 'lease'} at ${rate:.2f}/h, spent about "
                f"{money_text(spend)} so far. The node agent is stopped, the lease destroyed, "
                "and the provider asked until it confirms the lease is gone.",
                [Choice("cancel", "Cancel"), Choice("destroy", "Tear down", "error")],
                focus="cancel",
                cancel_value="cancel",
            ),
            lambda choice: self._on_teardown_choice(provider_id, choice),
        )

    def _on_teardown_choice(self, provider_id: str, choice: str | None) -> None:
        if choice == "destroy":
            self.post_message(self.TeardownRequested(provider_id))
