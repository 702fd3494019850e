"""The one protocol every provider speaks, and the value types it trades in.

Units are fixed here so no caller has to guess: money in US dollars per hour for the whole
offer (all GPUs, storage included where the provider quotes it), memory in MiB, bandwidth
in Mbit/s, reliability in 0..1, times as Unix seconds (float).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from mvp_tui.errors import UserError


@dataclass(frozen=True, slots=True)
class SelectionPolicy:
    """Which offers qualify; `None` means "no constraint"."""

    gpu_name: str | None = None
    min_gpu_ram_mb: int | None = None
    min_down_mbps: float | None = None
    min_up_mbps: float | None = None
    min_reliability: float | None = None
    require_verified: bool = True
    max_price_per_hour: float | None = None
    limit: int = 64


@dataclass(frozen=True, slots=True)
class Offer:
    """One rentable machine as this app shows it, normalised across providers."""

    provider: str
    offer_id: str
    gpu_name: str
    num_gpus: int
    gpu_ram_mib: int  # per GPU
    price_per_hour: float  # USD/h, all-in for the whole offer
    reliability: float  # 0..1
    down_mbps: float
    up_mbps: float
    location: str
    cuda_max: float | None = None
    host_id: str | None = None  # Vast: the host (the owner of one or more machines)
    # Vast: the machine itself, which a host may have several of; the host memory's key
    # (lease/host_journal.host_key).
    machine_id: str | None = None
    verified: bool = False
    cpu: str = ""
    ram_mib: int = 0
    # The provider's stock hint (RunPod: none/low/medium/high); "" where it publishes none.
    # A hint, not a reservation.
    stock: str = ""
    # RunPod: the data centers the type is in stock in (the pod lands in one of them).
    data_centers: tuple[str, ...] = ()
    # Vast bills image pulls per GB outside its $/h (`inet_down_cost`); `pull_usd` is that
    # for this run's image ([image] size_gb), paid once at the start.
    download_usd_per_gb: float = 0.0
    pull_usd: float = 0.0

    @property
    def all_in_per_hour(self) -> float:
        """What the first hour costs: the rate plus pulling the image."""
        return self.price_per_hour + self.pull_usd

    @property
    def vram_gib_total(self) -> float:
        return self.num_gpus * self.gpu_ram_mib / 1024

    @property
    def price_per_gib_vram_hour(self) -> float:
        """USD per GiB of total VRAM per hour; 0 when the offer has no GPU memory."""
        total = self.vram_gib_total
        return self.price_per_hour / total if total else 0.0


class Outcome(enum.Enum):
    """How a create call ended, as the lease walk needs to know it."""

    CREATED = "created"
    UNAVAILABLE = "unavailable"  # offer gone or sold: try the next one
    FORBIDDEN = "forbidden"  # not allowed on this offer: try the next one
    AMBIGUOUS = "ambiguous"  # timeout, reset, 5xx: an instance may exist; reconcile by label
    REJECTED = "rejected"  # the request itself is bad: stop
    NO_CREDITS = "no_credits"  # stop
    AUTH_FAILED = "auth_failed"  # stop


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything a create call sends besides the offer itself."""

    label: str
    image: str
    env: Mapping[str, str]
    disk_gb: int
    onstart: str | None = None
    ssh_public_key: str | None = None


@dataclass(frozen=True, slots=True)
class CreateResult:
    outcome: Outcome
    provider_id: str | None = None
    detail: str = ""  # sanitised provider text, never a secret
    http_status: int | None = None


class LeaseState(enum.Enum):
    PENDING = "pending"  # created, not yet running
    RUNNING = "running"
    STOPPED = "stopped"
    DEAD = "dead"  # exited / errored: it will never become ready
    GONE = "gone"  # the provider no longer lists it


@dataclass(frozen=True, slots=True)
class SshEndpoint:
    host: str
    port: int
    user: str
    via: str  # "direct" (public IP + mapped 22/tcp) or "proxy" (ssh_host:ssh_port)


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """One instance as the provider reports it now."""

    provider_id: str
    label: str | None
    state: LeaseState
    raw_state: str = ""
    ssh: SshEndpoint | None = None
    price_per_hour: float | None = None
    started_at: float | None = None
    detail: str = ""
    data_center: str = ""  # RunPod: where the pod landed (the host memory's key)


class DestroyOutcome(enum.Enum):
    ACCEPTED = "accepted"  # the provider took the request; confirm by listing
    GONE = "gone"  # it did not exist (404 / not found): nothing bills
    FAILED = "failed"  # error answer or transport error: retry


@dataclass(frozen=True, slots=True)
class DestroyResult:
    outcome: DestroyOutcome
    detail: str = ""
    http_status: int | None = None


class ProviderError(UserError):
    """A provider call failed in a way the caller must show to the user.

    `fix` says what the user can do; the message never contains a secret.
    """

    def __init__(self, message: str, *, fix: str = "", http_status: int | None = None) -> None:
        super().__init__(message, fix=fix)
        self.http_status = http_status


def checked_api_key(api_key: str, service: str, fix: str) -> str:
    """`api_key` when it can go in a header; a ProviderError naming `service` otherwise."""
    if not api_key or not api_key.strip():
        raise ProviderError(f"no {service} API key is configured", fix=fix)
    if any(not (33 <= ord(c) < 127) for c in api_key):
        raise ProviderError(
            f"the {service} API key contains spaces or non-printable characters", fix=fix
        )
    return api_key


@dataclass(frozen=True, slots=True)
class ApiErrors:
    """How one marketplace's HTTP API failures read: its name, where its URL is set, and the
    fixes for a refused key, rate limiting and no answer. One wording for every provider."""

    name: str  # "Vast.ai"
    section: str  # "vastai": the config section holding api_url
    api_url: str
    auth_fix: str
    rate_limit_fix: str
    network_fix: str

    def answer(
        self, action: str, status: int, detail: str, *, auth_failed: bool, retries: int
    ) -> ProviderError:
        """A ProviderError for an answer (`detail` already redacted) that `action` can't use."""
        if auth_failed:
            return ProviderError(
                f"{self.name} refused the API key while {action} ({detail})",
                fix=self.auth_fix,
                http_status=status,
            )
        if status == 429:
            return ProviderError(
                f"{self.name} kept rate-limiting {action}: HTTP 429 after {retries} retries",
                fix=self.rate_limit_fix,
                http_status=429,
            )
        if status >= 500:
            return ProviderError(
                f"{self.name} failed while {action} ({detail})",
                fix="a server-side error: retry in a minute",
                http_status=status,
            )
        return ProviderError(
            f"{self.name} rejected {action} ({detail})",
            fix=f"check the values sent and [{self.section}] api_url ({self.api_url})",
            http_status=status,
        )

    def no_answer(self, action: str, reason: str) -> ProviderError:
        return ProviderError(
            f"no answer from {self.name} at {self.api_url} while {action}: {reason}",
            fix=self.network_fix,
        )


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    billing: bool  # False for local nodes: nothing ever bills
    notes: tuple[str, ...] = field(default_factory=tuple)
    ssh: bool = True  # False: leases are reached without SSH (the node runs as a child process)


class SecretOutcome(enum.Enum):
    """How a provider answered storing an attempt's secret."""

    STORED = "stored"  # on the account: `secret_id` names it
    REFUSED = "refused"  # a clear refusal (or it never left): nothing was stored
    UNCLEAR = "unclear"  # no clear answer: it may exist, under a name but no known id


@dataclass(frozen=True, slots=True)
class StoredSecret:
    """The answer to storing one attempt's secret; never holds the value."""

    outcome: SecretOutcome
    secret_id: str | None = None
    detail: str = ""  # sanitised provider text
    http_status: int | None = None


@runtime_checkable
class AttemptSecrets(Protocol):
    """A provider that hands an attempt's private host key to its node through the
    provider's own secret store (RunPod secrets) instead of the create's plain env: stored
    before the create, referenced by the create, deleted once the instance is gone."""

    def secret_name(self, label: str) -> str | None: ...  # None: the attempt needs none

    async def store_secret(self, label: str) -> StoredSecret: ...

    async def delete_secret(self, secret_id: str) -> DestroyResult: ...

    def secret_removal(self, name: str, secret_id: str | None) -> str: ...  # by hand


@runtime_checkable
class BillingReader(Protocol):
    """A provider that publishes what a deleted lease cost (RunPod's /billing/pods)."""

    async def billed_usd(self, provider_id: str) -> float | None: ...


@runtime_checkable
class Provider(Protocol):
    """What the run engine needs from any provider. All calls are async and never raise
    for an answer the walk can classify; they raise `ProviderError` for the rest."""

    info: ProviderInfo

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]: ...

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult: ...

    async def get(self, provider_id: str) -> LeaseStatus: ...

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]: ...

    async def destroy(self, provider_id: str) -> DestroyResult: ...

    async def aclose(self) -> None: ...
