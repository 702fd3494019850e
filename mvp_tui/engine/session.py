"""The run across providers: one engine and controller per provider walked, in order.

Picks may mix providers (the board lists every provider's offers). The offers are walked in
their order as runs of one provider (`[v1, v2, l1, v3]`: vastai (v1, v2), local (l1),
vastai (v3)); each run by an engine of that provider. When one gives no serving node and
nothing of it bills, the next provider's offers are tried. The dashboard and headless mode
both drive a `RunSession`; neither swaps engines by hand.

The dashboard sends the run its commands through this object (the methods below, nothing
else); what it knows of the run it folds from the run's events (`engine/run_status.py`),
told of each provider walked by `SessionChanged`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from mvp_tui.config import ConfigError
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.controller import (
    Plan,
    PlanEnd,
    RunAborted,
    RunController,
    StopResult,
)
from mvp_tui.engine.events import SessionChanged
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.run import RunEngine
from mvp_tui.lease.restart import DownReport, OpenLease
from mvp_tui.providers.base import Offer

# (provider, the session's hub): an engine of that provider, on the session's hub and ledger.
EngineFactory = Callable[[str, ChannelHub], RunEngine]
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
        # The session's one lease ledger: its engines share it (`engine_for` is given the
        # first engine's), so the money of every provider walked is in one place.
        self.ledger = engine.ledger
        # The session's one channel hub: the first engine's, given to every engine it makes,
        # so the panes (and headless's frame printer) attach once, for every provider walked.
        self.hub: ChannelHub = engine.hub
        self.retired: list[RunEngine] = []
        self._engine_for = engine_for
        # Offers of another provider can be walked (an engine can be made for it).
        self.can_switch = engine_for is not None
        self._on_engine = on_engine  # a fresh engine is in place (headless: its redactor)
        self._model: tuple[str, str] | None = None  # the picker's (repo, file), for every engine
        self._earlier: list[OpenLease] = []  # what the restart check found

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
        fresh = self._engine_for(kind, self.hub)  # ConfigError: that provider is not configured
        if fresh.ledger is not self.ledger:
            raise RuntimeError("an engine factory must give its engines the session's ledger")
        if fresh.hub is not self.hub:
            raise RuntimeError("an engine factory must give its engines the session's hub")
        if self._model is not None:
            fresh.choose_model(*self._model)
        self.retired.append(engine)
        self.engine, self.controller = fresh, RunController(fresh)
        if self._on_engine is not None:
            self._on_engine(fresh)
        fresh.ctx.emit(self.said())
        fresh.started()
        await engine.aclose(keep_hub=True)  # the hub is the session's: it stays open
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

    # -- what the dashboard asks ----------------------------------------------------------
    def started(self) -> None:
        """The run begins: its provider and limits said first (the dashboard's status)."""
        self.engine.ctx.emit(self.said())  # the dashboard's status folds it (a replay too)
        self.engine.started()

    def said(self, *, closed: bool = False) -> SessionChanged:
        """What `SessionChanged` says now: the provider of the moment, its traits and its
        engine's limits (a UI seeds its status with it before the run says anything)."""
        ctx, info = self.engine.ctx, self.engine.provider.info
        return SessionChanged(
            at=ctx.clock(), run_id=ctx.run_id, provider=info.name, billing=info.billing,
            ssh=info.ssh, limits=dataclasses.asdict(ctx.settings.limits), closed=closed,
        )

    async def search_offers(self) -> list[Offer]:
        return await self.engine.search_offers()

    def choose_model(self, repo: str, file: str) -> None:
        """The hub model the next lease serves, on whichever provider it is made. Refused
        (`RunFailed`) while a lease is being made or held: its node serves the model it has."""
        if self.controller.busy or self.controller.holds_lease:
            raise RunFailed(
                "a lease is being made or held, and its node serves the model it was given: "
                "choose the model before leasing, or tear the lease down first"
            )
        self.engine.choose_model(repo, file)
        self._model = (repo, file)

    async def earlier_leases(self) -> list[OpenLease]:
        """The restart check: leases earlier runs recorded that still exist (kept here for
        `down_earlier`)."""
        self._earlier = await self.engine.leasing.earlier_leases()
        return self._earlier

    async def down_earlier(self) -> DownReport:
        """Tear down what the restart check found (confirmed by the provider); the session
        holds none of them after."""
        earlier, self._earlier = self._earlier, []
        return await self.engine.leasing.down_earlier([o.run_id for o in earlier])

    async def reattach(self, earlier: OpenLease, plan: Plan) -> PlanEnd:
        return await self.controller.reattach(earlier, plan)

    async def current_price(self, provider_id: str) -> float | None:
        """The $/h the provider quotes now for one of this run's leases (None: unpriced)."""
        status = await self.engine.provider.get(provider_id)
        return status.price_per_hour

    def submit(self, text: str) -> int | None:
        """Queue a prompt from the pane; its id, or None when the node does not serve yet
        (the queue exists once it does)."""
        prompts = self.engine.serving.prompts
        if prompts is None:
            return None
        return prompts.submit(text, self.engine.ctx.settings.prompt.max_tokens, turn=True)

    def cancel_prompt(self) -> None:
        """The prompt answering now is cancelled (nothing before the run serves)."""
        prompts = self.engine.serving.prompts
        if prompts is not None:
            prompts.cancel()

    def new_conversation(self) -> None:
        """The pane's next prompt sends no earlier turn (nothing before the run serves)."""
        prompts = self.engine.serving.prompts
        if prompts is not None:
            prompts.new_conversation()

    async def postpone_idle_stop(self) -> bool:
        return await self.engine.serving.postpone_idle_stop()

    async def stop(
        self, *, destroy: bool = True, final: bool = False, reason: str = ""
    ) -> StopResult:
        """The run's teardown (`final`: the session takes no new lease, said at once)."""
        if final:
            self.engine.ctx.emit(self.said(closed=True))
        return await self.controller.stop(destroy=destroy, final=final, reason=reason)

    async def close(self) -> None:
        """The session ends: a run still holding a lease (its UI went away without stopping
        it: a crash, a test's shutdown) is stopped first, so nothing is left billing."""
        if self.controller.result is None and self.controller.holds_lease:
            await self.stop(final=True, reason="the dashboard closed")
        await self.engine.aclose()
