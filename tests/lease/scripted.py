"""A scripted in-memory Provider: a protocol-level double for the walk's unit tests.

It keeps instances like a provider would (label, state, SSH endpoint) and lets a test script
answers per offer or per call. The must-show tests run against the real VastAiProvider and
FakeVast over HTTP instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

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
    ProviderError,
    ProviderInfo,
    SelectionPolicy,
    SshEndpoint,
)


def offer(offer_id: str, price: float = 0.3, gpu: str = "RTX 4090") -> Offer:
    return Offer(
        provider="scripted",
        offer_id=offer_id,
        gpu_name=gpu,
        num_gpus=1,
        gpu_ram_mib=24576,
        price_per_hour=price,
        reliability=0.99,
        down_mbps=900.0,
        up_mbps=600.0,
        location="Texas, US",
    )


@dataclass
class Instance:
    provider_id: str
    label: str
    offer_id: str
    polls_left: int
    stuck: bool = False
    dies: bool = False
    price: float = 0.3

    def status(self) -> LeaseStatus:
        if self.dies:
            return LeaseStatus(
                self.provider_id, self.label, LeaseState.DEAD, "exited", detail="OCI failed"
            )
        if self.stuck or self.polls_left > 0:
            self.polls_left -= 1
            return LeaseStatus(self.provider_id, self.label, LeaseState.PENDING, "loading")
        ssh = SshEndpoint("127.0.0.1", 22022, "root", "direct")
        return LeaseStatus(
            self.provider_id, self.label, LeaseState.RUNNING, "running", ssh, self.price
        )


@dataclass
class Step:
    """One scripted create answer: `perform` makes the instance anyway (answer lost)."""

    outcome: Outcome
    perform: bool = False
    http_status: int | None = None
    detail: str = ""
    with_id: bool = False  # the answer carries the id of the instance it made
    raises: bool = False


@dataclass
class ScriptedProvider(ProviderBase):
    info: ProviderInfo = field(default_factory=lambda: ProviderInfo("scripted", billing=True))
    instances: dict[str, Instance] = field(default_factory=dict)
    answers: dict[str, Outcome] = field(default_factory=dict)  # per offer; default CREATED
    steps: deque[Step] = field(default_factory=deque)  # per create call, before `answers`
    stuck: set[str] = field(default_factory=set)
    dies: set[str] = field(default_factory=set)
    polls_to_run: int = 1
    hidden_lists: int = 0  # the next N listings show nothing (eventual consistency)
    list_fails: bool = False
    destroy_failures: int = 0  # the next N destroys answer FAILED
    undeletable: set[str] = field(default_factory=set)  # destroy accepted, stays listed
    destroyed: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    on_create: Callable[[Offer, CreateRequest], None] | None = None
    next_id: int = 7000

    def billing(self) -> list[str]:
        return sorted(self.instances)

    def _make(self, offer: Offer, label: str) -> Instance:
        self.next_id += 1
        inst = Instance(
            str(self.next_id),
            label,
            offer.offer_id,
            self.polls_to_run,
            stuck=offer.offer_id in self.stuck,
            dies=offer.offer_id in self.dies,
            price=offer.price_per_hour,
        )
        self.instances[inst.provider_id] = inst
        return inst

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        return []

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        self.calls.append(("create", request.label))
        if self.on_create is not None:
            self.on_create(offer, request)
        if self.steps:
            step = self.steps.popleft()
            made = self._make(offer, request.label) if step.perform else None
            if step.raises:
                raise ProviderError("connection reset by peer", fix="check the network")
            pid = made.provider_id if made and step.with_id else None
            return CreateResult(step.outcome, pid, step.detail, step.http_status)
        outcome = self.answers.get(offer.offer_id, Outcome.CREATED)
        if outcome is Outcome.CREATED:
            inst = self._make(offer, request.label)
            return CreateResult(Outcome.CREATED, inst.provider_id, "", 200)
        status = {Outcome.UNAVAILABLE: 404, Outcome.FORBIDDEN: 403, Outcome.NO_CREDITS: 400}
        return CreateResult(outcome, None, f"scripted {outcome.value}", status.get(outcome, 400))

    async def get(self, provider_id: str) -> LeaseStatus:
        self.calls.append(("get", provider_id))
        inst = self.instances.get(provider_id)
        if inst is None:
            return LeaseStatus(provider_id, None, LeaseState.GONE)
        return inst.status()

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        self.calls.append(("list", prefix))
        if self.list_fails:
            raise ProviderError("listing failed", fix="retry")
        if self.hidden_lists > 0:
            self.hidden_lists -= 1
            return []
        return [
            LeaseStatus(i.provider_id, i.label, LeaseState.PENDING, "loading")
            for i in self.instances.values()
            if i.label.startswith(prefix)
        ]

    async def destroy(self, provider_id: str) -> DestroyResult:
        self.calls.append(("destroy", provider_id))
        if self.destroy_failures > 0:
            self.destroy_failures -= 1
            return DestroyResult(DestroyOutcome.FAILED, "scripted 500", 500)
        if provider_id not in self.instances:
            return DestroyResult(DestroyOutcome.GONE, "", 404)
        if provider_id not in self.undeletable:
            del self.instances[provider_id]
            self.destroyed.append(provider_id)
        return DestroyResult(DestroyOutcome.ACCEPTED, "", 200)

    async def aclose(self) -> None:
        return None

    def count(self, op: str) -> int:
        return sum(1 for c in self.calls if c[0] == op)
