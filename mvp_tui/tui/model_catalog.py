"""The model picker's catalog in the dashboard: the hub (`engine/hub_models.py`) for search
and files, the board's offers for the fit per quant, the run's context and node count."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mvp_tui.engine.gguf_quants import RepoHit
from mvp_tui.engine.hub_models import HubModels
from mvp_tui.engine.quant_fit import RepoFit
from mvp_tui.providers.base import Offer


class HubCatalog:
    """A `widgets.model_picker.ModelCatalog` over one hub."""

    def __init__(
        self,
        hub: HubModels,
        *,
        offers: Callable[[], Sequence[Offer]],
        context: int | None,
        nodes: int,
        current: str,
        slots: int = 1,
    ) -> None:
        self._hub = hub
        self._offers = offers  # the board's, in its order, read when a repo is listed
        self._context = context
        self._nodes = nodes
        self._slots = slots  # the fit's slots ([model] parallel; unset: one)
        self._current = current

    @property
    def current(self) -> str:
        return self._current

    async def search(self, query: str) -> Sequence[RepoHit]:
        return await self._hub.search(query)

    async def quants(self, repo: str) -> RepoFit:
        return await self._hub.fit(repo, self._offers(), context=self._context,
                                   nodes=self._nodes, slots=self._slots)
