"""The rehearsal's provider: a simulated marketplace (the fake Vast.ai server on loopback,
spoken to by the real Vast.ai client) whose rented node is this machine (the local
provider's node agent).

Every marketplace step is the real one against the simulation: offers searched, creates
answered (or sold, lost, refused, as a fault set scripts), instances polled until running,
deletes confirmed. When an instance runs, its "node" is a local node agent started with the
same environment; destroying the instance stops that agent first. Nothing leaves loopback
and nothing bills: the offers are labelled "rehearsal".
"""

from __future__ import annotations

import dataclasses

from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    DestroyResult,
    LeaseState,
    LeaseStatus,
    Offer,
    Outcome,
    ProviderBase,
    ProviderInfo,
    SelectionPolicy,
)
from mvp_tui.providers.local.client import OFFER_ID as LOCAL_OFFER_ID
from mvp_tui.providers.local.client import PROVIDER_NAME as LOCAL
from mvp_tui.providers.local.client import LocalProvider
from mvp_tui.providers.local.node import LineHandler
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.providers.vastai.kind import KIND as VASTAI_KIND

NAME = "rehearsal"
VASTAI = VASTAI_KIND.name  # the simulated marketplace speaks the Vast.ai API


class RehearsalProvider(ProviderBase):
    """`Provider` over the simulated marketplace; the node runs on this machine (no SSH)."""

    info = ProviderInfo(
        name=NAME,
        billing=False,  # a simulation: nothing bills, and the node's switch has no cloud
        notes=("a simulated marketplace on loopback", "the rented node is this machine"),
        ssh=False,
    )

    def __init__(self, *, market: VastAiProvider, on_line: LineHandler | None = None) -> None:
        self.market = market
        self.node = LocalProvider(on_line=on_line)
        self._nodes: dict[str, str] = {}  # instance id -> the local node's id
        self._requests: dict[str, CreateRequest] = {}  # instance id -> its create request
        self.last_skipped: list[str] = []

    def set_line_handler(self, on_line: LineHandler) -> None:
        """The engine's handler of node output (it exists only once the engine does)."""
        self.node = LocalProvider(on_line=on_line)

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        offers = await self.market.search_offers(policy)
        self.last_skipped = list(self.market.last_skipped)
        return [dataclasses.replace(o, provider=NAME) for o in offers]

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        result = await self.market.create(dataclasses.replace(offer, provider=VASTAI), request)
        if result.outcome is Outcome.CREATED and result.provider_id:
            self._requests[result.provider_id] = request
        return result

    async def _start_node(self, provider_id: str) -> str | None:
        """The instance runs: its node is started here (once); None when it cannot be."""
        if provider_id in self._nodes:
            return self._nodes[provider_id]
        request = self._requests.get(provider_id)
        if request is None:
            return None
        here = Offer(provider=LOCAL, offer_id=LOCAL_OFFER_ID, gpu_name="", num_gpus=0,
                     gpu_ram_mib=0, price_per_hour=0.0, reliability=1.0, down_mbps=0.0,
                     up_mbps=0.0, location="this machine")
        started = await self.node.create(here, request)
        if started.outcome is not Outcome.CREATED or started.provider_id is None:
            return None
        self._nodes[provider_id] = started.provider_id
        return started.provider_id

    async def get(self, provider_id: str) -> LeaseStatus:
        status = await self.market.get(provider_id)
        if status.state is not LeaseState.RUNNING:
            return status
        node_id = await self._start_node(provider_id)
        if node_id is None:
            why = "the node could not start on this machine"
            return dataclasses.replace(status, state=LeaseState.DEAD, detail=why)
        node = await self.node.get(node_id)
        if node.state is not LeaseState.RUNNING:
            return dataclasses.replace(status, state=LeaseState.DEAD, detail=node.detail)
        # The node is this machine's agent, reached without SSH: the market's endpoint is not it.
        return dataclasses.replace(status, ssh=None)

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        return await self.market.list_by_label(prefix)

    async def destroy(self, provider_id: str) -> DestroyResult:
        node_id = self._nodes.pop(provider_id, None)
        if node_id is not None:
            await self.node.destroy(node_id)
        self._requests.pop(provider_id, None)
        return await self.market.destroy(provider_id)

    async def aclose(self) -> None:
        await self.node.aclose()
        await self.market.aclose()
