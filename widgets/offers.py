"""The Offers pane: every offer, filtered and sorted, picked by keyboard into a fallback order.

The table is a keyed view of `OffersModel` (Dolphie's way): row key = offer id, and every
change (a refresh, a sort, a filter, a pick) is a diff applied inside `batch_update` with
`update_cell` / `add_row` / `remove_row` and the table's own `sort`, with the cursor put back
on the same offer by key. Large diffs (a filter that hides thousands) rebuild instead, since
removing rows one by one is quadratic in the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Input
from textual.widgets.data_table import ColumnKey

from mvp_tui.providers.base import Offer
from mvp_tui.widgets.filter_bar import FilterBar
from mvp_tui.widgets.offers_model import COLUMNS, Column, OfferRow, OffersModel
from mvp_tui.widgets.pane import Pane

# Above this many removals a diff clears and re-adds instead (remove_row is O(rows)).
REBUILD_ABOVE_REMOVALS = 64
_STYLED_COLUMNS = (Column.PICK, Column.PRICE, Column.PER_GIB)


class KeyedCell(Text):
    """A cell that knows its row's key, so the table's own `sort` can order by the model."""

    __slots__ = ("row_key",)

    def __init__(self, text: str, row_key: str, *, style: Style | str = "") -> None:
        super().__init__(text, style=style, end="", no_wrap=True)
        self.row_key = row_key


class OffersTable(DataTable[Text]):
    """The offers grid; colours for picked and cheap rows come from the theme via CSS."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "offers-table--cheap",
        "offers-table--picked",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        for column in COLUMNS:
            self.add_column(
                Text(column.value, justify="right" if column.numeric else "left"), key=column.value
            )

    def cursor_key(self) -> str | None:
        """The offer id under the cursor, or None on an empty table."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def cells(self, row: OfferRow) -> list[Text]:
        """The row's renderables: provider text as plain `Text` (never markup)."""
        cheap = self.get_component_rich_style("offers-table--cheap") if row.cheap else ""
        picked = self.get_component_rich_style("offers-table--picked") if row.picked else ""
        out: list[Text] = [KeyedCell(row.cells[0], row.key, style=picked)]
        for column, text in zip(COLUMNS[1:], row.cells[1:], strict=True):
            style = cheap if column in (Column.PRICE, Column.PER_GIB) else ""
            cell = Text(text, style=style, end="", no_wrap=True)
            if column.numeric:
                cell.justify = "right"
            out.append(cell)
        return out


class OffersPane(Pane):
    """Offers from the provider; `set_offers` refreshes, Enter posts `LeaseRequested`."""

    TITLE = "Offers"
    EMPTY_TEXT = (
        "Offers from {provider} appear here, filtered by your limits and sorted by $/h. "
        "Press r to search, / to filter, space to pick a fallback order, Enter to lease."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "filter", id="filter"),
        Binding("s", "sort", "sort", id="offers-sort"),
        Binding("S", "reverse_sort", "reverse", show=False, id="offers-sort-reverse"),
        Binding("space", "pick", "pick", id="offers-pick"),
        Binding("enter", "lease", "lease", id="lease"),
        Binding("escape", "clear_filter", "clear filter", show=False, id="offers-clear-filter"),
    ]

    class LeaseRequested(Message):
        """Lease these offers, tried in this order (the picks, or the highlighted one)."""

        def __init__(self, offers: tuple[Offer, ...]) -> None:
            super().__init__()
            self.offers = offers

    def __init__(self, *, provider: str, id: str | None = "offers-pane") -> None:
        self.provider = provider
        self.model = OffersModel()
        self._shown: dict[str, OfferRow] = {}
        self._order: list[str] = []
        # The offer the cursor was on when a filter hid it: it comes back with the offer,
        # unless the user has moved the cursor since (then `_placed` differs).
        self._hidden_key: str | None = None
        self._placed: str | None = None
        super().__init__(id=id)

    def empty_text(self) -> str:
        return self.EMPTY_TEXT.format(provider=self.provider)

    def compose_content(self) -> ComposeResult:
        yield FilterBar(
            placeholder="filter GPU / location  (Enter keeps, Esc clears)", id="offers-filter"
        )
        yield OffersTable(id="offers-table")

    def on_mount(self) -> None:
        self.query_one(FilterBar).display = False
        self.query_one(OffersTable).display = False
        self.border_subtitle = ""
        self.app.theme_changed_signal.subscribe(self, self._restyle)

    @property
    def table(self) -> OffersTable:
        return self.query_one(OffersTable)

    def focus_target(self) -> Widget | None:
        return self.table

    # -- the API the app uses ------------------------------------------------------------
    def set_offers(self, offers: Sequence[Offer]) -> None:
        """Show these offers (a search or a refresh); cursor and picks stay on their ids."""
        self.model.set_offers(offers)
        self.refresh_view()

    def refresh_view(self) -> None:
        """Bring the table in line with the model by key, keeping the cursor's offer."""
        table = self.table
        focus_was_pane = self.app.focused is self
        key = table.cursor_key()
        if key != self._placed:
            self._hidden_key = None  # the user moved: that is where the cursor belongs now
        rows = self.model.rows()
        if self._hidden_key is not None and any(r.key == self._hidden_key for r in rows):
            key, self._hidden_key = self._hidden_key, None
        with self.app.batch_update():
            if self._needs_rebuild(rows):
                self._rebuild(rows)
            else:
                self._apply_diff(rows)
            self._restore_cursor(key)
        if key is not None and key not in self._shown:
            self._hidden_key = self._hidden_key or key
        self._placed = table.cursor_key()
        has_rows = self.model.total > 0
        self.set_empty(not has_rows)
        table.display = has_rows
        self.border_subtitle = self.model.subtitle(self.provider) if has_rows else ""
        self.refresh_bindings()
        if focus_was_pane and has_rows:
            table.focus()

    def _needs_rebuild(self, rows: list[OfferRow]) -> bool:
        if not self._shown:
            return True
        keep = {row.key for row in rows}
        removed = sum(1 for key in self._order if key not in keep)
        return removed > REBUILD_ABOVE_REMOVALS

    def _rebuild(self, rows: list[OfferRow]) -> None:
        table = self.table
        table.clear()
        for row in rows:
            table.add_row(*table.cells(row), key=row.key)
        self._remember(rows)

    def _apply_diff(self, rows: list[OfferRow]) -> None:
        table = self.table
        keep = {row.key for row in rows}
        order = [key for key in self._order if key in keep]
        for key in self._order:
            if key not in keep:
                table.remove_row(key)
        for row in rows:
            old = self._shown.get(row.key)
            if old is None:
                table.add_row(*table.cells(row), key=row.key)
                order.append(row.key)
            elif old != row:
                self._update_row(old, row)
        wanted = [row.key for row in rows]
        if order != wanted:
            rank = {key: index for index, key in enumerate(wanted)}
            table.sort(Column.PICK.value, key=lambda cell: rank[cell.row_key])
        self._remember(rows)

    def _update_row(self, old: OfferRow, new: OfferRow) -> None:
        table = self.table
        cells = table.cells(new)
        restyled = (old.cheap, old.picked) != (new.cheap, new.picked)
        for index, column in enumerate(COLUMNS):
            if old.cells[index] != new.cells[index] or (restyled and column in _STYLED_COLUMNS):
                cell = cells[index]
                # Re-measuring a column costs a pass over all its cells: only when it grows.
                grows = cell.cell_len > table.columns[ColumnKey(column.value)].content_width
                table.update_cell(new.key, column.value, cell, update_width=grows)

    def _remember(self, rows: list[OfferRow]) -> None:
        self._shown = {row.key: row for row in rows}
        self._order = [row.key for row in rows]

    def _restore_cursor(self, key: str | None) -> None:
        table = self.table
        if key is not None and key in self._shown:
            table.move_cursor(row=table.get_row_index(key), animate=False, scroll=True)

    def _restyle(self, _theme: object) -> None:
        # Cell styles are resolved from the theme when a cell is made: remake them all.
        if self._shown:
            self._shown = {}
            self.refresh_view()

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in {"filter", "sort", "reverse_sort", "pick", "lease"}:
            return True if self.model.total else None
        if action == "clear_filter":
            return bool(self.model.filter_text)
        return True

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.focus()

    def action_clear_filter(self) -> None:
        self._close_filter(keep=False)

    def action_sort(self) -> None:
        self.model.cycle_sort()
        self.refresh_view()

    def action_reverse_sort(self) -> None:
        self.model.reverse_sort()
        self.refresh_view()

    def action_pick(self) -> None:
        key = self.table.cursor_key()
        if key is not None:
            self.model.toggle_pick(key)
            self.refresh_view()

    def action_lease(self) -> None:
        offers = self.model.chosen(self.table.cursor_key())
        if offers:
            self.post_message(self.LeaseRequested(offers))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # The table's own Enter (select_cursor) means "lease" here.
        event.stop()
        self.action_lease()

    # -- the filter bar ------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "offers-filter":
            event.stop()
            self.model.set_filter(event.value)
            self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "offers-filter":
            event.stop()
            self._close_filter(keep=True)

    def on_filter_bar_cleared(self, event: FilterBar.Cleared) -> None:
        event.stop()
        self._close_filter(keep=False)

    def _close_filter(self, *, keep: bool) -> None:
        bar = self.query_one(FilterBar)
        if not keep:
            bar.clear_quietly()
            self.model.set_filter("")
            self.refresh_view()
        bar.display = bool(self.model.filter_text)
        self.table.focus()
