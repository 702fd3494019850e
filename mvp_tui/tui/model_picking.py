"""The model picker in the dashboard: opened by its key or the palette, and its choice
applied: the run's next lease serves it (every provider's engine), the board's fit follows,
and on request it is written back to the user's config file (tomlkit, comments kept)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mvp_tui.config import Config, ConfigPaths
from mvp_tui.config.toml_file import save_hub_model
from mvp_tui.config.values import Source
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.hub_models import HubModels
from mvp_tui.engine.model_fit import fit_slots
from mvp_tui.providers.base import Offer
from mvp_tui.tui.board_wiring import BoardWiring
from mvp_tui.tui.model_catalog import HubCatalog
from mvp_tui.untrusted import clean_line
from mvp_tui.widgets.model_picker import ModelChoice, ModelPickerScreen
from mvp_tui.widgets.offers import OffersPane

PICKED = "the model picker"


def _served(config: Config) -> str:
    """The model served now, its file first (the quant is at the end of its name)."""
    source = config.model_source
    if source.local_path is not None:
        return f"local file {source.local_path}"
    return f"{source.file} ({source.repo})"


class ModelPicking(BoardWiring):
    """The app gives it `config`, `mode` and `board` (through `BoardWiring`)."""

    # The hub's endpoint (MVP_HF_ENDPOINT) and HF_TOKEN; tests point it at a fake hub.
    hub_environ: Mapping[str, str] = os.environ

    def action_open_models(self) -> None:
        """The picker over the hub, against the offers on the board now."""
        screen = ModelPickerScreen(self.model_catalog(), save_key=self._key_of("picker-save"),
                                   back_key=self._key_of("picker-back"))
        self.push_screen(screen, self._model_chosen)

    def _key_of(self, binding_id: str) -> str:
        raise NotImplementedError  # the app's: the key as remapped, as a person reads it

    def model_catalog(self) -> HubCatalog:
        settings = self.config.settings
        return HubCatalog(
            HubModels(self.hub_environ),
            offers=self._board_offers,
            context=settings.model.max_context,
            nodes=settings.runtime.nodes,
            slots=fit_slots(settings.model.parallel),
            current=_served(self.config),
        )

    def _board_offers(self) -> list[Offer]:
        """The board's offers in the order it shows them (its sort and filter)."""
        model = self.query_one(OffersPane).model
        return [o for key in model.view() if (o := model.offer(key)) is not None]

    def _model_chosen(self, choice: ModelChoice | None) -> None:
        if choice is None:
            return
        try:
            self.mode.choose_model(choice.repo, choice.file)  # a run's engines serve it next
        except RunFailed as exc:
            self.notify(str(exc), title="model not changed", severity="warning",
                        timeout=15, markup=False)
            return
        before = self.config
        self.config = before.with_hub_model(choice.repo, choice.file, PICKED)
        said = f"the next lease serves {choice.repo}, file {choice.file}"
        if choice.save:
            said += "; " + self._save_model(choice, before.file, before.sources)
        self.notify(clean_line(said, 600), title=f"model: {clean_line(choice.quant, 24)}",
                    timeout=15, markup=False)
        self._model_changed()

    def _save_model(self, choice: ModelChoice, file: Path | None,
                    sources: Mapping[str, Source]) -> str:
        path = file or ConfigPaths().default
        try:
            return save_hub_model(path, choice.repo, choice.file, sources)
        except OSError as exc:
            return f"could not save [model] to {path}: {exc.strerror or exc}"

    def _model_changed(self) -> None:
        """The board's fit is the new model's: unknown until its need is read."""
        if self.board is None:
            return
        self.board.forget_need()
        self._need = None
        result, pane = self._board_result, self.query_one(OffersPane)
        if result is not None:
            pane.need = ""
            pane.set_outlook(result.outlook(None),
                             show_unfit=self.config.settings.offers.show_unfit)
        self._work(self._read_need, "model size", "model-size")
