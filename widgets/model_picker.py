"""The model picker: search the hub's GGUF repos, see a repo's quants with their size and what
each needs at the run's context, and which is the largest each kind of offer on the board
holds; Enter uses the highlighted quant for the next lease, `s` also saves it to the config.

It knows nothing of HTTP: it asks a `ModelCatalog` (the app gives one backed by the hub,
`tui/model_catalog.py`) and shows what comes back, or the `UserError` it raises, in words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from mvp_tui.engine.gguf_quants import QuantModel, RepoHit
from mvp_tui.engine.model_fit import GIB
from mvp_tui.engine.quant_fit import RepoFit
from mvp_tui.errors import UserError
from mvp_tui.untrusted import clean_line

T = TypeVar("T")
WIDE = 150  # from this width the quants and the offers sit side by side

PICKER_MAX_WIDTH = 150
PICKER_CSS = """
ModelPickerScreen { align: center middle; }
ModelPickerScreen > .picker {
    width: 100%; max-width: PICKER_MAX_WIDTH; height: 100%; max-height: 44;
    border: round $accent; background: $surface; padding: 0 1;
}
ModelPickerScreen .picker-title { height: 1; text-style: bold; text-wrap: nowrap;
    text-overflow: ellipsis; }
ModelPickerScreen #picker-query { height: 3; margin: 0; }
ModelPickerScreen DataTable { height: 1fr; background: $surface; }
ModelPickerScreen #picker-quant-view { height: 1fr; layout: horizontal; }
ModelPickerScreen.-narrow #picker-quant-view { layout: vertical; }
ModelPickerScreen #picker-quant-view DataTable { width: 1fr; }
ModelPickerScreen #picker-fit { margin-left: 1; }
ModelPickerScreen.-narrow #picker-fit { margin-left: 0; }
ModelPickerScreen .picker-status { height: auto; max-height: 6; }
ModelPickerScreen .picker-status.-error { color: $fail; text-style: bold; }
ModelPickerScreen .picker-hint { height: 1; color: $text-muted; text-wrap: nowrap;
    text-overflow: ellipsis; }
""".replace("PICKER_MAX_WIDTH", str(PICKER_MAX_WIDTH))


class ModelCatalog(Protocol):
    """What the picker asks. Failures are `UserError`s worded for the user."""

    @property
    def current(self) -> str:
        """The model served now, in words."""
        ...

    async def search(self, query: str) -> Sequence[RepoHit]: ...

    async def quants(self, repo: str) -> RepoFit: ...


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The picker's answer: hub `repo`'s `file` for the next lease; `save`: in the config too."""

    repo: str
    file: str
    quant: str
    save: bool = False


def _gb(size: int) -> str:
    return f"{size / GIB:.1f} GB"


def _fit_text(text: str, width: int) -> str:
    """`text` in `width` cells, its middle cut out (a quant file's name ends in what
    tells it apart: the quant, the part number)."""
    if len(text) <= width:
        return text
    keep = max(1, width - 1)
    head = keep // 3
    return f"{text[:head]}…{text[len(text) - (keep - head):]}"


def _parts_cell(quant: QuantModel) -> str:
    if not quant.split:
        return "1"
    return str(quant.parts) if quant.complete else f"{len(quant.files)}/{quant.parts}!"


class ModelPickerScreen(ModalScreen[ModelChoice | None]):
    """Returns the chosen quant, or None (Esc)."""

    DEFAULT_CSS = PICKER_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "model picker: back / close", id="picker-back"),
        Binding("s", "choose(True)", "model picker: use the quant, save it in the config",
                id="picker-save"),
        Binding("slash", "focus_query", "model picker: search again", show=False,
                id="picker-search"),
        Binding("down", "focus_results", "model picker: to the results", show=False,
                id="picker-results"),
    ]

    def __init__(self, catalog: ModelCatalog, query: str = "", *, save_key: str = "s",
                 back_key: str = "Esc") -> None:
        super().__init__()
        self.catalog = catalog
        self.query_text = query
        self._save_key, self._back_key = save_key, back_key  # as remapped, for the hint
        self.hits: list[RepoHit] = []
        self.fit: RepoFit | None = None  # the repo whose quants are shown

    def compose(self) -> ComposeResult:
        with Vertical(classes="picker"):
            yield Static(Text(f"Model now: {clean_line(self.catalog.current, 200)}"),
                         classes="picker-title")
            yield Input(self.query_text, placeholder="search the hub's GGUF repos, Enter",
                        id="picker-query")
            repos: DataTable[Text] = DataTable(id="picker-repos", cursor_type="row")
            yield repos
            with Container(id="picker-quant-view"):
                yield DataTable(id="picker-quants", cursor_type="row")
                yield DataTable(id="picker-fit", cursor_type="row")
            yield Static(classes="picker-status")
            yield Static(classes="picker-hint")

    def on_mount(self) -> None:
        repos = self._table("picker-repos")
        repos.add_columns("repo", "downloads", "likes", "access")
        self._table("picker-quants").add_columns("quant", "size", "needs", "fits", "parts",
                                                 "file")
        self._table("picker-fit").add_columns("offer", "VRAM", "from $/h", "largest quant")
        self._show_quants(False)
        self._narrow(self.size.width)
        self.query_one("#picker-query", Input).focus()
        self._say("type a name and press Enter: the hub's GGUF repos, most downloaded first")
        if self.query_text:
            self._search(self.query_text)

    def on_resize(self, event: events.Resize) -> None:
        self._narrow(event.size.width)
        if self.fit is not None:
            self._fill_quants(self.fit)  # the file names cut to the new width

    def _narrow(self, width: int) -> None:
        self.set_class(width < WIDE, "-narrow")

    # -- parts ---------------------------------------------------------------------------
    def _table(self, table_id: str) -> DataTable[Text]:
        return self.query_one(f"#{table_id}", DataTable)

    def _show_quants(self, shown: bool) -> None:
        self._table("picker-repos").display = not shown
        self.query_one("#picker-quant-view").display = shown
        save, back = self._save_key, self._back_key
        hint = (f"Enter: use for the next lease · {save}: use and save to the config · "
                f"{back}: back" if shown
                else f"Enter: search / list the repo's quants · ↓: results · {back}: close")
        self.query_one(".picker-hint", Static).update(Text(hint))

    def _say(self, text: str, *, error: bool = False) -> None:
        status = self.query_one(".picker-status", Static)
        status.update(Text(clean_line(text, 600)))
        status.set_class(error, "-error")

    def _ask(self, work: Callable[[], Awaitable[T]], done: Callable[[T], None]) -> None:
        """One question to the catalog at a time (a newer one replaces it); its failure is
        said in the status line, never raised."""

        async def run() -> None:
            try:
                answer = await work()
            except UserError as exc:
                self._say(str(exc), error=True)
                return
            except Exception as exc:  # said, never a silent "searching…" for ever
                self._say(f"unexpected {type(exc).__name__}: {exc}", error=True)
                return
            done(answer)

        self.run_worker(run(), group="model-picker", exclusive=True, exit_on_error=False)

    # -- search --------------------------------------------------------------------------
    @on(Input.Submitted, "#picker-query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        query = event.value.strip()
        if query:
            self._search(query)

    def _search(self, query: str) -> None:
        self._say(f"searching the hub for {query!r}…")
        self._show_quants(False)
        self._ask(lambda: self.catalog.search(query), lambda hits: self._hits(query, hits))

    def _hits(self, query: str, hits: Sequence[RepoHit]) -> None:
        self.hits = list(hits)
        table = self._table("picker-repos")
        table.clear()
        for hit in self.hits:
            table.add_row(Text(clean_line(hit.repo, 100)), Text(f"{hit.downloads:,}"),
                          Text(f"{hit.likes:,}"), Text("gated" if hit.gated else "open"))
        if not self.hits:
            self._say(f"no GGUF repo on the hub matches {query!r}")
            return
        self._say(f"{len(self.hits)} GGUF repos for {query!r}: Enter lists one's quants")
        table.focus()

    # -- a repo's quants -----------------------------------------------------------------
    @on(DataTable.RowSelected, "#picker-repos")
    def _repo_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.hits):
            repo = self.hits[event.cursor_row].repo
            self._say(f"listing the GGUF files of {repo}…")
            self._ask(lambda: self.catalog.quants(repo), self._quants)

    def _quants(self, fit: RepoFit) -> None:
        self.fit = fit
        self._fill_quants(fit, keep_cursor=False)
        offers = self._table("picker-fit")
        offers.clear()
        for row in fit.offers:
            offer = row.offer
            kind = f"{clean_line(offer.gpu_name, 24)} ×{offer.num_gpus}" if offer.num_gpus else (
                clean_line(offer.gpu_name, 24))
            many = f" ({row.count})" if row.count > 1 else ""
            vram = offer.vram_gib_total or offer.ram_mib / 1024
            offers.add_row(
                Text(f"{clean_line(offer.provider, 8)} {kind}{many}"),
                Text(f"{vram:.0f} GB"),
                Text(f"{offer.price_per_hour:.3f}"),
                Text(row.cell),
            )
        self._show_quants(True)
        self._table("picker-quants").focus()
        self._say(self._summary(fit))

    def _fill_quants(self, fit: RepoFit, *, keep_cursor: bool = True) -> None:
        quants = self._table("picker-quants")
        row = quants.cursor_row if keep_cursor else 0
        quants.clear()
        # What the file column has: the frame's inside (or half of it, side by side) less
        # the other columns (about 40 cells with their padding).
        inside = min(self.size.width, PICKER_MAX_WIDTH) - 4
        width = max(12, (inside if self.has_class("-narrow") else inside // 2) - 40)
        for quant in fit.quants:
            need = fit.need_of(quant)
            quants.add_row(
                Text(clean_line(quant.label, 10)),
                Text(_gb(quant.size)),
                Text(f"{need.per_node_gb} GB" if need is not None else "?"),
                Text(f"{fit.holders(quant)}/{len(fit.offers)}" if need is not None else "?"),
                Text(_parts_cell(quant)),
                Text(_fit_text(clean_line(quant.file.rsplit("/", 1)[-1], 200), width)),
            )
        if 0 < row < quants.row_count:
            quants.move_cursor(row=row)

    def _summary(self, fit: RepoFit) -> str:
        repo = clean_line(fit.repo, 100)
        if not fit.quants:
            return f"{repo} has no GGUF model file"
        if not fit.needs:
            return f"{repo}: {len(fit.quants)} models; fit unknown: {fit.note}"
        where = "below" if self.has_class("-narrow") else "right"
        board = (f"{where}, the largest quant each of the board's {len(fit.offers)} kinds of "
                 "offer holds" if fit.offers else "no offers on the board to hold them yet")
        return (f"{repo}: {len(fit.quants)} quants; needs at {fit.context:,} tokens of "
                f"context (weights + KV cache + margin); {board}")

    # -- choosing ------------------------------------------------------------------------
    @on(DataTable.RowSelected, "#picker-quants")
    def _quant_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_choose(False)

    def action_choose(self, save: bool) -> None:
        fit = self.fit
        table = self._table("picker-quants")
        if fit is None or not self.query_one("#picker-quant-view").display:
            return
        if not 0 <= table.cursor_row < len(fit.quants):
            return
        quant = fit.quants[table.cursor_row]
        why = quant.unservable()
        if why:
            self._say(f"{why}; the picker lists it for its size", error=True)
            return
        self.dismiss(ModelChoice(fit.repo, quant.file, quant.label, save))

    def action_back(self) -> None:
        if self.query_one("#picker-quant-view").display:
            self._show_quants(False)
            self._table("picker-repos").focus()
            self._say(f"{len(self.hits)} GGUF repos: Enter lists one's quants")
            return
        self.dismiss(None)

    def action_focus_query(self) -> None:
        self.query_one("#picker-query", Input).focus()

    def action_focus_results(self) -> None:
        table = self._table("picker-quants" if self.fit is not None and self.query_one(
            "#picker-quant-view").display else "picker-repos")
        if table.row_count:
            table.focus()
