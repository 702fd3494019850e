"""The Offers pane's table: a virtual table on Textual's Line API.

`render_line(y)` paints one screen line: the header on the first, then the row whose index is
the scroll offset plus the line, fetched by key from the model. So only the rows on screen are
ever formatted or rendered, sorting or filtering 10,000 offers is a swap of the key list and
one screen's repaint, and every row stays reachable by keyboard. Column widths are fixed per
data set (the model derives them from the header and the value formats), never measured per
cell. Provider text reaches the screen as plain segments, never parsed as Rich markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mvp_tui.widgets.offers_model import COLUMNS, DROP_ORDER, Column, OfferRow

CELL_PADDING = 1  # blank cells either side of every column's text
HEADER_LINES = 1
_PRICE_COLUMNS = tuple(i for i, c in enumerate(COLUMNS) if c in (Column.PRICE, Column.PER_GIB))
_PICK_COLUMN = COLUMNS.index(Column.PICK)
# Numbers line up on the right; the pick order reads as a label, on the left.
_RIGHT = tuple(c.numeric and c is not Column.PICK for c in COLUMNS)

RowSource = Callable[[str], OfferRow]


def _no_row(key: str) -> OfferRow:
    raise KeyError(key)


@dataclass(frozen=True, slots=True)
class _Styles:
    """The Rich styles one paint uses, resolved from the component classes (the theme)."""

    base: Style
    header: Style
    cheap: Style
    picked: Style
    gone: Style
    failed: Style
    cursor: Style
    cursor_cheap: Style
    cursor_picked: Style
    cursor_failed: Style
    unfit: Style


class OffersTable(ScrollView, can_focus=True):
    """Rows are offer ids in the model's order; the cursor is a row index, read as a key."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "offers-table--header",
        "offers-table--cursor",
        "offers-table--cheap",
        "offers-table--picked",
        "offers-table--gone",
        "offers-table--failed",
        "offers-table--unfit",
    }
    # Structure and the stock look (DataTable's, from theme variables); the app's own
    # colours for cheap and picked rows are in themes/app.tcss.
    DEFAULT_CSS = """
    OffersTable {
        background: $surface;
        color: $foreground;
        & > .offers-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .offers-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .offers-table--header { background-tint: $foreground 5%; }
            & > .offers-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "cursor up", show=False, id="offers-cursor-up"),
        Binding("down", "cursor_down", "cursor down", show=False, id="offers-cursor-down"),
        Binding("pageup", "cursor_page_up", "page up", show=False, id="offers-page-up"),
        Binding("pagedown", "cursor_page_down", "page down", show=False, id="offers-page-down"),
        Binding("home,ctrl+home", "cursor_first", "first row", show=False, id="offers-first"),
        Binding("end,ctrl+end", "cursor_last", "last row", show=False, id="offers-last"),
    ]

    class RowSelected(Message):
        """The highlighted row was clicked again (as DataTable does: a second click selects)."""

        def __init__(self, table: OffersTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> OffersTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys: Sequence[str] = ()
        self._row: RowSource = _no_row
        self._widths: tuple[int, ...] = tuple(len(c.value) for c in COLUMNS)
        self._shown: tuple[int, ...] = tuple(range(len(COLUMNS)))  # column indexes painted
        self._cursor = 0
        self._styles: _Styles | None = None

    # -- data -----------------------------------------------------------------------------
    @property
    def keys(self) -> Sequence[str]:
        """Every row's key, in table order."""
        return self._keys

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def cursor_row(self) -> int:
        """The cursor's row index (0 on an empty table)."""
        return self._cursor

    def set_rows(self, keys: Sequence[str], row: RowSource, widths: Sequence[int]) -> None:
        """Show these rows (painted on demand through `row`); the cursor keeps its index.

        Callers that want the cursor on an offer call `move_cursor_to_key` afterwards.
        """
        self._keys = keys
        self._row = row
        self._widths = tuple(widths)
        self._cursor = min(self._cursor, max(0, len(keys) - 1))
        self._fit_columns()

    @property
    def shown_columns(self) -> tuple[Column, ...]:
        """The columns painted at this width (a narrow board drops `DROP_ORDER` first)."""
        return tuple(COLUMNS[i] for i in self._shown)

    def _fit_columns(self) -> None:
        """Drop the least useful columns until the rest fit the table's width."""
        room = self.scrollable_content_region.width or self.size.width
        shown = list(range(len(COLUMNS)))
        dropped: list[int] = []
        for column in DROP_ORDER:
            if not room or self._width_of(shown) <= room:
                break
            dropped.append(COLUMNS.index(column))
            shown.remove(dropped[-1])
        # A wide column's drop may leave room for narrower, less useful ones: back they come.
        for index in reversed(dropped[:-1]):
            if self._width_of([*shown, index]) <= room:
                shown = sorted([*shown, index])
        self._shown = tuple(shown)
        self.virtual_size = Size(self._table_width(), len(self._keys) + HEADER_LINES)
        if self.scroll_y > self.max_scroll_y:
            self.scroll_to(y=self.max_scroll_y, animate=False)
        self.refresh()

    def cursor_key(self) -> str | None:
        """The offer id under the cursor, or None on an empty table."""
        return self._keys[self._cursor] if self._keys else None

    def move_cursor(self, index: int) -> None:
        """Put the cursor on row `index` (clamped) and scroll it into view."""
        index = max(0, min(index, len(self._keys) - 1))
        if index != self._cursor:
            old, self._cursor = self._cursor, index
            self._refresh_row(old)
            self._refresh_row(index)
        self.scroll_cursor_visible()

    def move_cursor_to_key(self, key: str) -> bool:
        """Put the cursor on the row with this key; False (cursor unmoved) if it is absent."""
        try:
            index = self._keys.index(key)
        except ValueError:
            return False
        self.move_cursor(index)
        return True

    def scroll_cursor_visible(self) -> None:
        """Scroll the least needed so the cursor's row shows below the header."""
        if not self._keys or not self.size.height:
            return  # not laid out yet: `on_resize` calls again once the table has a size
        region = Region(int(self.scroll_x), self._cursor + HEADER_LINES, 1, 1)
        self.scroll_to_region(
            region,
            spacing=Spacing(top=HEADER_LINES),
            animate=False,
            force=True,
            x_axis=False,
            immediate=True,
        )

    def _width_of(self, shown: Sequence[int]) -> int:
        return sum(self._widths[i] for i in shown) + 2 * CELL_PADDING * len(shown)

    def _table_width(self) -> int:
        return self._width_of(self._shown)

    def _refresh_row(self, index: int) -> None:
        self.refresh_line(index + HEADER_LINES)

    @property
    def _page_rows(self) -> int:
        """Rows that fit below the header."""
        return max(1, self.scrollable_content_region.height - HEADER_LINES)

    # -- keys and mouse -------------------------------------------------------------------
    def action_cursor_up(self) -> None:
        self.move_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self._cursor + 1)

    def action_cursor_page_up(self) -> None:
        page = self._page_rows
        self.scroll_to(y=self.scroll_y - page, animate=False)
        self.move_cursor(self._cursor - page)

    def action_cursor_page_down(self) -> None:
        page = self._page_rows
        self.scroll_to(y=self.scroll_y + page, animate=False)
        self.move_cursor(self._cursor + page)

    def action_cursor_first(self) -> None:
        self.move_cursor(0)

    def action_cursor_last(self) -> None:
        self.move_cursor(len(self._keys) - 1)

    def row_at(self, y: int) -> int | None:
        """The row index painted on content line `y`, or None (the header, below the rows)."""
        if y < HEADER_LINES:
            return None
        index = int(self.scroll_y) + y - HEADER_LINES
        return index if 0 <= index < len(self._keys) else None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        index = None if offset is None else self.row_at(offset.y)
        if index is None:
            return
        event.stop()
        if index == self._cursor:
            self.post_message(self.RowSelected(self, self._keys[index]))
        else:
            self.move_cursor(index)

    def on_resize(self, event: events.Resize) -> None:
        self._fit_columns()
        self.refresh()
        self.scroll_cursor_visible()

    # -- painting -------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _resolve_styles(self) -> _Styles:
        if self._styles is None:
            base = self.rich_style
            component = self.get_component_rich_style
            cheap = base + component("offers-table--cheap")
            picked = base + component("offers-table--picked")
            failed = base + component("offers-table--failed")
            cursor = component("offers-table--cursor")
            self._styles = _Styles(
                base=base,
                header=base + component("offers-table--header"),
                cheap=cheap,
                picked=picked,
                gone=base + component("offers-table--gone"),
                failed=failed,
                cursor=base + cursor,
                cursor_cheap=cheap + cursor,
                cursor_picked=picked + cursor,
                cursor_failed=failed + cursor,
                unfit=base + component("offers-table--unfit"),
            )
        return self._styles

    def render_lines(self, crop: Region) -> list[Strip]:
        self._styles = None  # focus and theme change the component styles: resolve per paint
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        styles = self._resolve_styles()
        scroll_x = int(self.scroll_x)
        width = self.size.width
        if y < HEADER_LINES:
            return self._header_strip(styles).crop_extend(scroll_x, scroll_x + width, styles.header)
        index = int(self.scroll_y) + y - HEADER_LINES
        if index >= len(self._keys):
            return Strip.blank(width, styles.base)
        cursor = index == self._cursor
        strip = self._row_strip(self._row(self._keys[index]), styles, cursor=cursor)
        return strip.crop_extend(
            scroll_x, scroll_x + width, styles.cursor if cursor else styles.base
        )

    def _header_strip(self, styles: _Styles) -> Strip:
        texts = [self._cell(COLUMNS[i].value, self._widths[i], _RIGHT[i]) for i in self._shown]
        return Strip([Segment("".join(texts), styles.header)], self._table_width())

    def _row_strip(self, row: OfferRow, styles: _Styles, *, cursor: bool) -> Strip:
        plain = styles.cursor if cursor else styles.base
        if row.gone or row.refused:  # sold, or never rented: the whole row dimmed
            plain = plain + styles.gone if cursor else styles.gone
        elif row.unfit:  # the model cannot fit its VRAM: the whole row dimmed
            plain = plain + styles.unfit if cursor else styles.unfit
        pad = Segment(" " * CELL_PADDING, plain)
        segments: list[Segment] = []
        for index in self._shown:
            text, width, right = row.cells[index], self._widths[index], _RIGHT[index]
            style = plain
            if row.failed and not row.gone and index == _PICK_COLUMN:
                # The badge of a host that failed recently: in the lease-failed colour.
                style = styles.cursor_failed if cursor else styles.failed
            elif row.picked and index == _PICK_COLUMN:
                style = styles.cursor_picked if cursor else styles.picked
            elif row.cheap and index in _PRICE_COLUMNS:
                style = styles.cursor_cheap if cursor else styles.cheap
            if style is plain:
                segments.append(Segment(self._cell(text, width, right), plain))
            else:  # the padding stays in the row's style, as in DataTable
                segments += (pad, Segment(self._fit(text, width, right), style), pad)
        return Strip(segments, self._table_width())

    @staticmethod
    def _fit(text: str, width: int, right: bool) -> str:
        """The text fitted to the column width, to the right for numbers."""
        return text.rjust(width) if right and len(text) <= width else set_cell_size(text, width)

    @classmethod
    def _cell(cls, text: str, width: int, right: bool) -> str:
        """The fitted text with the cell padding either side."""
        pad = " " * CELL_PADDING
        return f"{pad}{cls._fit(text, width, right)}{pad}"
