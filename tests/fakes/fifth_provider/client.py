"""Fifth Cloud's client: an in-process fake marketplace (one account per process, `ACCOUNT`),
enough for the board, `offers` and `down` (search, list by label, get, destroy)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from mvp_tui.config import Config, ConfigError
from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    DestroyOutcome,
    DestroyResult,
    LeaseState,
    LeaseStatus,
    Offer,
    Outcome,
    ProviderBase,
    ProviderInfo,
    SelectionPolicy,
)
from mvp_tui.providers.local.node import LineHandler
from tests.fakes.fifth_provider.section import FifthSection

NAME = "fifth"


@dataclass
class Account:
    """What the fake marketplace holds: its offers and the instances on the account."""

    key: str = "fifth-key-0123456789"
    offers: list[Offer] = field(default_factory=list)
    instances: dict[str, str] = field(default_factory=dict)  # id -> label
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(501))

    def add_offer(self, offer_id: str, gpu: str, price: float) -> Offer:
        offer = Offer(provider=NAME, offer_id=offer_id, gpu_name=gpu, num_gpus=1,
                      gpu_ram_mib=24576, price_per_hour=price, reliability=0.99,
                      down_mbps=900.0, up_mbps=300.0, location="EU", verified=True)
        self.offers.append(offer)
        return offer

    def add_instance(self, label: str) -> str:
        provider_id = str(next(self.ids))
        self.instances[provider_id] = label
        return provider_id


ACCOUNT = Account()


class FifthProvider(ProviderBase):
    info = ProviderInfo(name=NAME, billing=True, notes=("an in-process fake marketplace",))

    def __init__(self, api_key: str, region: str) -> None:
        self.api_key = api_key
        self.region = region

    def _check(self) -> None:
        if self.api_key != ACCOUNT.key:
            from mvp_tui.providers.base import ProviderError

            raise ProviderError("Fifth Cloud refused the API key", http_status=401)

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        self._check()
        return list(ACCOUNT.offers)

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        self._check()
        return CreateResult(Outcome.CREATED, ACCOUNT.add_instance(request.label))

    async def get(self, provider_id: str) -> LeaseStatus:
        self._check()
        label = ACCOUNT.instances.get(provider_id)
        if label is None:
            return LeaseStatus(provider_id, None, LeaseState.GONE, raw_state="unknown")
        return LeaseStatus(provider_id, label, LeaseState.RUNNING, raw_state="running",
                           price_per_hour=0.5)

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        self._check()
        return [await self.get(i) for i, label in ACCOUNT.instances.items()
                if label.startswith(prefix)]

    async def destroy(self, provider_id: str) -> DestroyResult:
        self._check()
        if ACCOUNT.instances.pop(provider_id, None) is None:
            return DestroyResult(DestroyOutcome.GONE)
        return DestroyResult(DestroyOutcome.ACCEPTED)

    async def aclose(self) -> None:
        return None


def build(config: Config, on_line: LineHandler | None = None) -> FifthProvider:
    section = config.settings.of(FifthSection)
    if section is None or not section.api_key:
        raise ConfigError("[fifth] api_key is required when provider=fifth")
    return FifthProvider(section.api_key, section.region)
