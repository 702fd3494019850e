"""The model picker in the composed dashboard, by keys (Pilot) on the fake hub: `m` opens it,
a search lists repos, Enter a repo's quants and the largest one each kind of offer on the
board holds, a split quant is one row and is refused with why, a gated repo says what to
do; Enter uses a quant for the next lease, `s` also writes it to the config file (its
comments kept). The run's engine serves the choice; it is refused while a lease is held."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import RunState
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.session import RunSession
from mvp_tui.providers.base import Offer
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.model_picker import ModelPickerScreen
from mvp_tui.widgets.offers import OffersPane
from tests.fakes.hf_hub_server import FakeHfHub, picker_hub
from tests.tui.apps import make_app, record_toasts
from tests.widgets.data import offer, wait_until

LLAMA = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
TOML = """\
# my settings: kept
[model]
# the model I serve
gguf_repo = "someone/Old-GGUF"   # was this
gguf_file = "old-Q4_0.gguf"
gguf_revision = "abc123"
max_context = 8192

[ui.keys]
models = "f6"  # remapped: the picker opens on F6
picker-save = "ctrl+s"
"""


@pytest.fixture
def hub() -> Iterator[FakeHfHub]:
    with picker_hub() as fake:
        yield fake


def board_offers() -> list[Offer]:
    return [offer("1", 0.10, "RTX 3060", vram_mib=8 * 1024), offer("2", 0.30, "RTX 3090"),
            offer("3", 0.25, "RTX 3090"), offer("4", 1.80, "A100 SXM4", vram_mib=80 * 1024)]


def cells(table: DataTable[Text]) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def status(screen: ModelPickerScreen) -> str:
    return str(screen.query_one(".picker-status", Static).render())


async def open_picker(pilot: Pilot[int], hub: FakeHfHub, key: str = "m") -> ModelPickerScreen:
    app = pilot.app
    assert isinstance(app, MvpApp)
    app.hub_environ = {"MVP_HF_ENDPOINT": hub.url}
    pane = app.query_one(OffersPane)
    pane.set_offers(board_offers())
    pane.focus()
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(app.screen, ModelPickerScreen))
    screen = app.screen
    assert isinstance(screen, ModelPickerScreen)
    return screen


async def search(pilot: Pilot[int], screen: ModelPickerScreen, words: str) -> DataTable[Text]:
    await pilot.press(*words, "enter")
    repos: DataTable[Text] = screen.query_one("#picker-repos", DataTable)
    await wait_until(pilot, lambda: repos.row_count > 0)
    return repos


async def test_search_quants_split_gated_and_choose_by_keys(
    hub: FakeHfHub, tmp_path: Path
) -> None:
    app = make_app(toml=TOML, tmp=tmp_path)
    toasts = record_toasts(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")  # remapped away: nothing opens
        await pilot.pause()
        assert not isinstance(app.screen, ModelPickerScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Choose the model (f6)" in titles  # the palette's entry, with its key
        screen = await open_picker(pilot, hub, "f6")
        assert "now: old-Q4_0.gguf (someone/Old-GGUF)" in str(
            screen.query_one(".picker-title", Static).render())
        repos = await search(pilot, screen, "llama")
        assert [row[0] for row in cells(repos)] == [
            LLAMA, "unsloth/Llama-3.3-70B-Instruct-GGUF", "meta-llama/Llama-3.1-8B-Instruct-GGUF"]
        await pilot.press("enter")  # the most downloaded repo's quants
        quants = screen.query_one("#picker-quants", DataTable)
        await wait_until(pilot, lambda: quants.row_count > 0)
        assert [(r[0], r[2], r[3]) for r in cells(quants)] == [
            ("Q2_K", "5 GB", "3/3"), ("Q4_K_M", "7 GB", "3/3"), ("Q5_K_M", "8 GB", "3/3"),
            ("Q8_0", "10 GB", "2/3"), ("F16", "18 GB", "2/3")]
        fit = screen.query_one("#picker-fit", DataTable)
        assert [(r[0], r[3]) for r in cells(fit)] == [
            ("vastai RTX 3060 ×1", "Q5_K_M"), ("vastai RTX 3090 ×1 (2)", "F16"),
            ("vastai A100 SXM4 ×1", "F16")]
        assert "at 8,192 tokens of context" in status(screen)  # [model] max_context

        await pilot.press("escape", "down", "enter")  # back; the split repo
        await wait_until(pilot, lambda: cells(quants)[0][0] == "Q4_K_M")
        split = cells(quants)[1]
        assert split[:2] == ["Q8_0", "69.0 GB"] and split[4] == "2"  # parts
        assert split[5].endswith("-00001-of-00002.gguf")
        await pilot.press("down", "enter")  # choose the split one: refused, with why
        await wait_until(pilot, lambda: "split into 2 files" in status(screen))
        assert isinstance(app.screen, ModelPickerScreen)

        await pilot.press("escape", "down", "enter")  # the gated repo, no HF_TOKEN
        await wait_until(pilot, lambda: "is gated" in status(screen))
        said = status(screen)
        assert "meta-llama/Llama-3.1-8B-Instruct-GGUF is gated" in said
        assert "HF_TOKEN is not set" in said and "accept its terms at" in said

        await pilot.press("up", "up", "enter")  # the first repo again
        await wait_until(pilot, lambda: cells(quants)[0][0] == "Q2_K")
        await pilot.press("enter")  # Q2_K for this run: the file is left as it was
        await wait_until(pilot, lambda: not isinstance(app.screen, ModelPickerScreen))
        assert app.config.model_source.file == "Meta-Llama-3.1-8B-Instruct-Q2_K.gguf"
        assert (tmp_path / "config.toml").read_text() == TOML
        assert toasts.saying("the next lease serves")

        screen = await open_picker(pilot, hub, "f6")
        assert "Q2_K.gguf" in str(screen.query_one(".picker-title", Static).render())
        await search(pilot, screen, "8B-Instruct")
        await pilot.press("enter")
        quants = screen.query_one("#picker-quants", DataTable)
        await wait_until(pilot, lambda: quants.row_count == 5)
        hint = str(screen.query_one(".picker-hint", Static).render())
        assert "ctrl+s: use and save to the config" in hint  # the remapped key, said
        await pilot.press("down", "s")  # remapped away: nothing
        await pilot.pause()
        assert isinstance(app.screen, ModelPickerScreen)
        await pilot.press("ctrl+s")  # Q4_K_M: used, and saved to the config
        await wait_until(pilot, lambda: not isinstance(app.screen, ModelPickerScreen))
    source = app.config.model_source
    assert (source.repo, source.file, source.local_path, source.revision) == (
        LLAMA, "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", None, None)
    written = (tmp_path / "config.toml").read_text()
    assert written == TOML.replace('"someone/Old-GGUF"', f'"{LLAMA}"').replace(
        '"old-Q4_0.gguf"', '"Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"').replace(
        'gguf_revision = "abc123"\n', "")
    again = load_config(env={}, paths=ConfigPaths(explicit=tmp_path / "config.toml",
                                                  explicit_source="test"))
    assert again.model_source.file == "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"


def engine(
    tmp_path: Path, ledger: LeaseLedger | None = None, hub: ChannelHub | None = None
) -> RunEngine:
    config = load_config(env={"MVP_STATE_DIR": str(tmp_path / "state")},
                         paths=ConfigPaths(default=tmp_path / "none.toml"))
    return RunEngine(config, lambda _event: None, environ={}, ledger=ledger, hub=hub)


def test_the_engine_serves_the_choice(tmp_path: Path) -> None:
    session = RunSession(engine(tmp_path))
    session.choose_model(LLAMA, "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf")
    run = session.engine
    model = run.ctx.settings.model
    assert (model.gguf_repo, model.gguf_file, model.gguf_local_path) == (
        LLAMA, "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", None)
    assert run.ctx.node_env["MVP_GGUF_REPO"] == LLAMA  # what the node downloads
    assert run.ctx.node_env["MVP_GGUF_FILE"] == "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"
    assert "MVP_GGUF_LOCAL_PATH" not in run.ctx.node_env
    # The served name follows the choice when the user never set one.
    assert model.model_id == run.ctx.node_env["MVP_MODEL_ID"] == "meta-llama-3.1-8b-instruct-q8_0"


async def test_another_providers_engine_gets_the_choice_too(tmp_path: Path) -> None:
    first = engine(tmp_path)
    fresh = engine(tmp_path, first.ledger, first.hub)  # a session's ledger and hub
    session = RunSession(first, lambda kind, hub: fresh)
    session.choose_model(LLAMA, "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf")
    assert fresh.ctx.settings.model.gguf_file != "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"
    await session.use("vastai")  # a pick on another provider: a fresh engine for it
    assert session.engine is fresh
    assert fresh.ctx.settings.model.gguf_file == "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"
    await session.close()


def test_a_lease_in_the_making_keeps_its_model(tmp_path: Path) -> None:
    session = RunSession(engine(tmp_path))
    before = session.engine.ctx.settings.model
    session.controller.state = RunState.LEASING
    with pytest.raises(RunFailed, match="choose the model before leasing"):
        session.choose_model(LLAMA, "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf")
    assert session.engine.ctx.settings.model == before


def test_a_saved_hub_file_is_served_under_its_own_name(tmp_path: Path) -> None:
    """A config naming another hub file but no `[model] id` (what `models --save` writes):
    the served name is the file's, not the default model's; a name the user set stays."""
    path = tmp_path / "config.toml"
    path.write_text(f'[model]\ngguf_repo = "{LLAMA}"\n'
                    'gguf_file = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"\n')
    config = load_config(env={"MVP_STATE_DIR": str(tmp_path / "state")},
                         paths=ConfigPaths(explicit=path, explicit_source="test"))
    run = RunEngine(config, lambda _event: None, environ={})
    assert run.ctx.settings.model.model_id == "meta-llama-3.1-8b-instruct-q4_k_m"
    path.write_text(path.read_text() + 'id = "mine"\n')
    config = load_config(env={"MVP_STATE_DIR": str(tmp_path / "state")},
                         paths=ConfigPaths(explicit=path, explicit_source="test"))
    assert RunEngine(config, lambda _event: None, environ={}).ctx.settings.model.model_id == "mine"
