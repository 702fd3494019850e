"""The one protocol every provider speaks, and the value types it trades in.

Units are fixed here so no caller has to guess: money in US dollars per hour for the whole
offer (all GPUs, storage included where the provider quotes it), memory in MiB, bandwidth
in Mbit/s, reliability in 0..1, times as Unix seconds (float).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Collection, Mapping, Sequence
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
    # The node image's CUDA floor (`[image] cuda_min`): a host whose driver supports less
    # cannot start the image. None: no floor.
    min_cuda: float | None = None
    # The disk the create asks for (`[vastai] disk_gb`): priced into each offer (Vast's
    # `allocated_storage`) and required free on the host (`disk_space`). None: not asked.
    disk_gb: float | None = None


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
    # One GPU's memory bandwidth in GB/s (Vast `gpu_mem_bw`; RunPod from
    # providers/gpu_bandwidth.py); 0 when unknown. Decode speed is bounded by it.
    mem_bw_gbps: float = 0.0
    # Vast interruptible (`[vastai] rental = "bid"`): the bid sent with the create
    # (`min_bid` × `[vastai] bid_factor`, capped); `price_per_hour` is then that bid plus the
    # storage Vast bills besides. 0: on demand. An outbid pauses the instance.
    bid_per_hour: float = 0.0
    on_demand_per_hour: float = 0.0  # the same offer on demand, for comparison (bids only)
    # Vast: the host's free disk in GB (`disk_space`); None when not reported.
    disk_space_gb: float | None = None
    # Why this offer is never rented, though listed (Vast: the host's CUDA driver is below
    # the image's floor, or its free disk below the disk the run asks for): the board shows
    # it dimmed with this reason, the walk and the headless pick skip it. "" = rentable.
    refused: str = ""

    @property
    def bid(self) -> bool:
        """Whether this is an interruptible offer priced at our bid."""
        return self.bid_per_hour > 0

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
    # The provider says the container runs (RunPod: RUNNING), reachable or not yet: from
    # then on its log shows whether the start command ran (`StartChecker`).
    container_up: bool = False


@dataclass(frozen=True, slots=True)
class StartCheck:
    """What an instance's log says of its start command: ran (True), did not (False: the
    image's own entrypoint ran instead; `problem` and `fix` say so), or cannot tell yet."""

    ran: bool | None
    problem: str = ""
    fix: str = ""


@runtime_checkable
class StartChecker(Protocol):
    """A provider that can tell from an instance's log whether its start command ran."""

    async def start_check(self, provider_id: str) -> StartCheck: ...


@runtime_checkable
class VramNeedUser(Protocol):
    """A provider whose offer search can take the run's own VRAM need as its floor (RunPod
    `auto` with no `min_vram_gb`: seed 003's `vram_floor_gb`)."""

    vram_floor_key: str  # the config key that sets a floor of the user's own

    @property
    def wants_vram_need(self) -> bool:
        """Whether the run's need would set the floor (no floor of the user's own)."""
        ...

    @property
    def vram_floor_gb(self) -> int:
        """The floor per GPU the next search keeps, in whole GB."""
        ...

    def use_vram_need(self, per_node_bytes: int | None) -> int:
        """Take one node's need (the board's fit) as the floor, None: the provider's own
        fallback (the need could not be read); returns the floor per GPU."""
        ...


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


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    billing: bool  # False for local nodes: nothing ever bills
    notes: tuple[str, ...] = field(default_factory=tuple)
    ssh: bool = True  # False: leases are reached without SSH (the node runs as a child process)
    # The key pinned before create stays readable at the provider (Vast's `extra_env`): once
    # it answered, the node's host key is rotated over that session (ssh/host_key_rotation).
    rotates_host_key: bool = False


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


HOURS_PER_MONTH = 730.0  # how a per-month storage price becomes per hour


@dataclass(frozen=True, slots=True)
class NetworkVolume:
    """A provider's network volume as the run uses it (RunPod: the model cache)."""

    id: str
    name: str
    size_gb: int
    data_center: str

    def usd_per_month(self, usd_per_gb_month: float) -> float:
        return self.size_gb * usd_per_gb_month

    def usd_per_hour(self, usd_per_gb_month: float) -> float:
        return self.usd_per_month(usd_per_gb_month) / HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class KeptVolume:
    """A network volume of ours left on the account on purpose (it bills by the month)."""

    volume_id: str
    name: str
    size_gb: int
    usd_per_month: float


@runtime_checkable
class Provider(Protocol):
    """What the run engine needs from any provider. All calls are async and never raise
    for an answer the walk can classify; they raise `ProviderError` for the rest.

    The optional abilities are members too, each with its default declared on
    `ProviderBase`, so no caller has to probe a provider for them."""

    info: ProviderInfo

    @property
    def last_skipped(self) -> Sequence[str]: ...  # why rows of the last search were left out

    @property
    def last_reorder_error(self) -> str | None: ...  # why the last re-sort kept the order

    async def reorder_offers(
        self, remaining: Sequence[Offer], tried: Sequence[Offer]
    ) -> list[Offer] | None: ...

    def host_key_for(self, label: str) -> str | None: ...

    async def ensure_ssh_key(self, public_key_openssh: str) -> bool | None: ...

    async def prepare_volume(self) -> NetworkVolume | None: ...

    async def kept_volumes(self, recorded_ids: Collection[str]) -> list[KeptVolume]: ...

    async def wait_exited(self, provider_id: str) -> int | None: ...

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]: ...

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult: ...

    async def get(self, provider_id: str) -> LeaseStatus: ...

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]: ...

    async def destroy(self, provider_id: str) -> DestroyResult: ...

    async def aclose(self) -> None: ...


class ProviderBase:
    """The optional abilities' declared defaults (as Harlequin's adapter base class declares
    its optional methods): a provider subclasses this and overrides the abilities it has."""

    last_skipped: Sequence[str] = ()
    last_reorder_error: str | None = None

    async def reorder_offers(
        self, remaining: Sequence[Offer], tried: Sequence[Offer]
    ) -> list[Offer] | None:
        """The offers left, sorted again after one proved unplaceable; None: this provider
        keeps the order it gave (only RunPod re-reads its catalog)."""
        return None

    def host_key_for(self, label: str) -> str | None:
        """The public host key attempt `label`'s instance will present, made before the
        create so the first connect is already strict; None: pin what answers first."""
        return None

    async def ensure_ssh_key(self, public_key_openssh: str) -> bool | None:
        """Make sure the account holds this public key: True registered now, False already
        there; None: this provider has no account keys (nodes reached without them)."""
        return None

    async def prepare_volume(self) -> NetworkVolume | None:
        """The network volume the model cache lives on, found or made before the first
        create; None: none (the default, and every provider but RunPod)."""
        return None

    async def kept_volumes(self, recorded_ids: Collection[str]) -> list[KeptVolume]:
        """The account's network volumes mvp-tui uses (the configured one, and those
        `recorded_ids` name), each with its monthly cost, for the account check after a
        teardown; [] where the provider has none. Raises ProviderError when it cannot ask."""
        return []

    async def wait_exited(self, provider_id: str) -> int | None:
        """The exit code once a node's agent process ends on its own. The default cannot
        tell, so it never returns (rented nodes: the SSH session watches their agent)."""
        await asyncio.Event().wait()
        return None
