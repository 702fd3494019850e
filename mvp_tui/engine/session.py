"""The run across providers: one engine and controller per provider walked, in order.

Picks may mix providers (the board lists every provider's offers). The offers are walked in
their order as runs of one provider (`[v1, v2, l1, v3]`: vastai (v1, v2), local (l1),
vastai (v3)); each run by an engine of that provider. When one gives no serving node and
nothing of it bills, the next provider's offers are tried. The dashboard and headless mode
both drive a `RunSession`; neither swaps engines by hand.

The dashboard talks to the run only through this object (its typed methods and properties
below: what the App needs, nothing more); it never reaches into the engine, its controller
or its provider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from mvp_tui.config import ConfigError
from mvp_tui.config.sections.prompt import PromptSection
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.controller import (
    Plan,
    PlanEnd,
    RunAborted,
    RunController,
    RunState,
    StopResult,
)
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.run import RunEngine
from mvp_tui.lease.endpoint_record import EndpointRecord
from mvp_tui.lease.restart import DownReport, OpenLease
from mvp_tui.providers.base import Offer
from mvp_tui.secrets import Redactor

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

    # -- what the dashboard reads ---------------------------------------------------------
    @property
    def provider_name(self) -> str:
        """The provider being walked (`vastai`, `local`, …)."""
        return self.engine.provider.info.name

    @property
    def provider_bills(self) -> bool:
        return self.engine.provider.info.billing

    @property
    def provider_ssh(self) -> bool:
        return self.engine.provider.info.ssh

    @property
    def run_id(self) -> str:
        return self.engine.run_id

    @property
    def redactor(self) -> Redactor:
        return self.engine.redactor

    @property
    def limits(self) -> Limits:
        return self.engine.settings.limits

    @property
    def prompt_settings(self) -> PromptSection:
        return self.engine.settings.prompt

    @property
    def busy(self) -> bool:
        """A lease is being made, brought up or torn down."""
        return self.controller.busy

    @property
    def closed(self) -> bool:
        """The run is ending: no new lease."""
        return self.controller.closed

    @property
    def tearing_down(self) -> bool:
        return self.controller.state is RunState.TEARING_DOWN

    @property
    def holds_lease(self) -> bool:
        return self.controller.holds_lease

    @property
    def stopped(self) -> StopResult | None:
        """The last stop's result (None: not stopped since the last lease)."""
        return self.controller.result

    @property
    def endpoint(self) -> EndpointRecord | None:
        """The run's OpenAI endpoint while its node serves, else None."""
        endpoint = self.engine.endpoint
        return endpoint if endpoint is not None and endpoint.serving else None

    @property
    def run_dir(self) -> Path:
        return self.engine.store.run_dir(self.engine.run_id)

    # -- what the dashboard asks ----------------------------------------------------------
    def started(self) -> None:
        self.engine.started()

    async def search_offers(self) -> list[Offer]:
        return await self.engine.search_offers()

    async def model_need(self) -> ModelNeed:
        return await self.engine.model_need()

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
        return await self.engine.earlier_leases()

    async def down_earlier(self, run_ids: Sequence[str]) -> DownReport:
        return await self.engine.down_earlier(run_ids)

    async def reattach(self, earlier: OpenLease, plan: Plan) -> PlanEnd:
        return await self.controller.reattach(earlier, plan)

    async def current_price(self, provider_id: str) -> float | None:
        """The $/h the provider quotes now for one of this run's leases (None: unpriced)."""
        status = await self.engine.provider.get(provider_id)
        return status.price_per_hour

    def submit(self, text: str) -> int | None:
        """Queue a prompt from the pane; its id, or None when the node does not serve yet
        (the queue exists once it does)."""
        prompts = self.engine.prompts
        if prompts is None:
            return None
        return prompts.submit(text, self.engine.settings.prompt.max_tokens, turn=True)

    def prompt_command(self, command: Literal["cancel", "new_conversation"]) -> None:
        """`cancel`: the prompt answering now; `new_conversation`: the pane's next prompt
        sends no earlier turn. Nothing before the run serves."""
        prompts = self.engine.prompts
        if prompts is None:
            return
        if command == "cancel":
            prompts.cancel()
        else:
            prompts.new_conversation()

    async def postpone_idle_stop(self) -> bool:
        return await self.engine.serving.postpone_idle_stop()

    async def stop(
        self, *, destroy: bool = True, final: bool = False, reason: str = ""
    ) -> StopResult:
        return await self.controller.stop(destroy=destroy, final=final, reason=reason)

    async def aclose(self) -> None:
        await self.engine.aclose()
