"""The run across providers: one engine and controller per provider walked, in order.

Picks may mix providers (the board lists every provider's offers). The offers are walked in
their order as runs of one provider (`[v1, v2, l1, v3]`: vastai (v1, v2), local (l1),
vastai (v3)); each run by an engine of that provider. When one gives no serving node and
nothing of it bills, the next provider's offers are tried. The dashboard and headless mode
both drive a `RunSession`; neither swaps engines by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mvp_tui.config import ConfigError
from mvp_tui.engine.controller import Plan, PlanEnd, RunAborted, RunController
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.run import RunEngine
from mvp_tui.providers.base import Offer

EngineFactory = Callable[[str], RunEngine]
# (provider that gave nothing, the provider tried next, why): said to the user.
FallbackNote = Callable[[str, str, str], None]


def provider_groups(offers: Sequence[Offer]) -> list[tuple[str, tuple[Offer, ...]]]:
    """The offers in their order, as runs of one provider (`[v1, v2, l1, v3]` gives
    vastai (v1, v2), local (l1), vastai (v3)): each run is one engine's walk."""
    groups: list[tuple[str, tuple[Offer, ...]]] = []
    for offer in offers:
        if groups and groups[-1][0] == offer.provider:
            kind, run = groups[-1]
            groups[-1] = (kind, (*run, offer))
        else:
            groups.append((offer.provider, (offer,)))
    return groups


class RunSession:
    """Owns the run's engine and controller of the provider being walked, and the engines of
    the providers walked before (retired: closed, their records kept for the exit check)."""

    def __init__(
        self,
        engine: RunEngine,
        engine_for: EngineFactory | None = None,
        on_engine: Callable[[RunEngine], None] | None = None,
    ) -> None:
        self.engine = engine
        self.controller = RunController(engine)
        self.retired: list[RunEngine] = []
        self._engine_for = engine_for
        self._on_engine = on_engine  # a fresh engine is in place (the app re-attaches panes)

    @property
    def can_switch(self) -> bool:
        """Offers of another provider can be walked (an engine can be made for it)."""
        return self._engine_for is not None

    async def use(self, kind: str) -> RunEngine:
        """The engine of provider `kind`: the current one, or a fresh one when nothing of
        the current run may bill. Raises `RunFailed` (or `ConfigError`) saying why not."""
        engine = self.engine
        if engine.provider.info.name == kind:
            return engine
        if self._engine_for is None:
            raise RunFailed(
                f"offers of {kind} are leased from `mvp-tui --provider {kind}`; this run "
                f"leases on {engine.provider.info.name}"
            )
        if self.controller.holds_lease:
            raise RunFailed(
                f"the {engine.provider.info.name} run still holds a lease: tear it down "
                f"before leasing on {kind}"
            )
        fresh = self._engine_for(kind)  # ConfigError: that provider is not configured
        self.retired.append(engine)
        self.engine, self.controller = fresh, RunController(fresh)
        if self._on_engine is not None:
            self._on_engine(fresh)
        fresh.started()
        await engine.aclose()
        return fresh

    async def lease_and_serve(
        self, offers: Sequence[Offer], plan: Plan, on_fallback: FallbackNote | None = None
    ) -> PlanEnd:
        """Walk the offers in order across providers to a serving node, then serve as the
        plan says. A provider whose offers gave nothing (and left nothing billing) hands over
        to the next; the last failure raises `RunAborted`."""
        groups = provider_groups(offers)
        if not groups:
            raise RunFailed("no offers to try: widen the selection policy")
        for index, (kind, group) in enumerate(groups):
            following = groups[index + 1][0] if index + 1 < len(groups) else None
            try:
                await self.use(kind)
            except (RunFailed, ConfigError) as exc:
                if following is None:
                    raise
                if on_fallback is not None:
                    on_fallback(kind, following, str(exc))
                continue
            controller = self.controller
            try:
                return await controller.lease_and_serve(group, plan)
            except RunAborted as aborted:
                handover = following is not None and not controller.served
                if not (handover and aborted.result.nothing_bills):
                    raise
                if on_fallback is not None and following is not None:
                    on_fallback(kind, following, aborted.reason)
        raise RunFailed("no provider's offers gave a serving node")  # not reached
