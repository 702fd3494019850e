"""What the lease walk and teardown tell the dashboard (Leases pane) and `up --headless`.

Every field is plain (str, int, float, tuple) so an event is one complete JSON line. No field
ever holds a secret: labels, ids, prices, sanitised provider text only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mvp_tui.events import EngineEvent


class DeleteReason(enum.Enum):
    """Why a lease is being destroyed."""

    REQUESTED = "requested"  # the user asked (ctrl+d, `down`)
    NOT_READY = "not_ready"  # did not become running in time, or died
    DUPLICATE = "duplicate"  # an extra instance of an unclear create
    STRAY = "stray"  # an instance of this run found by the sweep
    INTERRUPTED = "interrupted"  # the walk was cancelled (Ctrl-C)
    UNWANTED = "unwanted"  # a create that failed but still produced an instance
    RECORD_FAILED = "record_failed"  # the run record could not be written: nothing else knows it
    HOST_FAILED = "host_failed"  # running, but the node failed on this host (or was lost)


class WalkFailure(enum.Enum):
    """Why a walk ended without a running lease."""

    NO_OFFERS = "no_offers"
    EXHAUSTED = "exhausted"  # every offer tried; none gave a running lease
    UNANSWERED = "unanswered"  # every create got no clear answer
    REJECTED = "rejected"
    NO_CREDITS = "no_credits"
    AUTH_FAILED = "auth_failed"
    PROVIDER_ERROR = "provider_error"  # a call failed in a way no other offer would fix
    DELETE_UNCONFIRMED = "delete_unconfirmed"  # a lease may still bill: no new one is made
    RECORD_FAILED = "record_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferPicked(EngineEvent):
    run_id: str
    offer_id: str
    gpu_name: str
    price_per_hour: float
    position: int  # 1-based place in the fallback list
    of: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferSkipped(EngineEvent):
    run_id: str
    offer_id: str
    price_per_hour: float
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkReordered(EngineEvent):
    """After an unplaceable offer the provider's catalog was read again: the offers left, in
    the order they will now be tried (or, when the read failed, kept as they were)."""

    run_id: str
    offers: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStarted(EngineEvent):
    run_id: str
    label: str
    offer_id: str
    gpu_name: str
    price_per_hour: float
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptAnswered(EngineEvent):
    run_id: str
    label: str
    offer_id: str
    outcome: str  # providers.base.Outcome value, or "error" when the call raised
    http_status: int | None
    detail: str
    provider_id: str | None
    created_at: float | None = None  # the record's billing start (the answer), when created


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileStarted(EngineEvent):
    run_id: str
    label: str
    waits_s: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled(EngineEvent):
    run_id: str
    label: str
    adopted_id: str | None  # None: not found after every wait
    destroyed: tuple[str, ...]  # duplicates confirmed gone
    unconfirmed: tuple[str, ...]  # duplicates whose delete could not be confirmed
    created_at: float | None = None  # the adopted lease's billing start, as recorded


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasePending(EngineEvent):
    run_id: str
    provider_id: str
    raw_state: str
    waited_s: float
    # What the instance itself says it bills (Vast: its row's `dph_total`, the disk it was
    # created with priced in), once it says so; None: the offer's price stands.
    price_per_hour: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRunning(EngineEvent):
    run_id: str
    provider_id: str
    label: str
    host: str
    port: int
    user: str
    via: str
    after_s: float  # from the create answer to running
    price_per_hour: float
    created_at: float | None = None  # the record's billing start (the create's answer)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefetchStarted(EngineEvent):
    """The lease's start command began fetching the model (providers/prefetch.py): it runs
    when the instance runs, so this comes with `LeaseRunning`; how many bytes it has is the
    agent's to report once it arrives (it adopts the file)."""

    run_id: str
    provider_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMounted(EngineEvent):
    """The run's pods mount this network volume as the model cache; it bills by the month
    until `mvp-tui volume delete` (never `down`)."""

    run_id: str
    provider: str
    volume_id: str
    name: str
    size_gb: int
    data_center: str
    usd_per_month: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseNotReady(EngineEvent):
    run_id: str
    provider_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseDeleting(EngineEvent):
    run_id: str
    provider_id: str
    reason: DeleteReason


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseDeleted(EngineEvent):
    run_id: str
    provider_id: str
    uptime_s: float
    spend_usd: float  # the estimate: the lease's $/h × its uptime
    billed_usd: float | None = None  # the provider's own figure, where it publishes one
    # "mvp-tui": our delete found it and it is confirmed gone; "node": it was already gone
    # when we deleted it (the node's switch or boot guard did; seed DeletedBy::Watchdog).
    deleted_by: str = "mvp-tui"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseDeleteUnconfirmed(EngineEvent):
    """The lease may still bill: the record keeps it as `deleting` (exit code 3)."""

    run_id: str
    provider_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkFailed(EngineEvent):
    run_id: str
    failure: WalkFailure
    reason: str
    attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep(EngineEvent):
    """Instances of this run looked for by label after unclear creates."""

    run_id: str
    prefix: str
    found: tuple[str, ...]
    destroyed: tuple[str, ...]
    unconfirmed: tuple[str, ...]
    listed: bool  # False: the provider could not be asked; nothing is known


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountChecked(EngineEvent):
    """After a teardown: what the provider lists under our label prefix, in every state it
    bills for (`lease/account_check.py`). Ids as `id:run`; `run_id` "" when every run of the
    prefix was in scope (`down --all`)."""

    run_id: str
    provider: str
    prefix: str
    listed: bool  # False: the provider could not be asked (`error` says why)
    destroyed: tuple[str, ...]
    unconfirmed: tuple[str, ...]  # ours, still there: may bill
    other_runs: tuple[str, ...]  # ours, of other runs: reported, not touched
    kept: tuple[str, ...]  # kept network volumes, "name $N/month"
    nothing_bills: bool
    error: str = ""
    # Named like ours, not made by this install ("provider:id"): reported, never touched.
    strangers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretStored(EngineEvent):
    """An attempt's secret (its host key) is on the provider's account, before the create."""

    run_id: str
    label: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretDeleted(EngineEvent):
    """An attempt's secret is deleted, its instance being gone."""

    run_id: str
    label: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretLeftOver(EngineEvent):
    """A secret that could not be deleted (or whose id is unknown). It does not bill: a
    warning, with how to remove it (`fix`), never an exit code 3."""

    run_id: str
    label: str
    name: str
    secret_id: str | None
    reason: str
    fix: str
