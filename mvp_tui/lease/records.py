"""Run records: what a run tried and what it leased, on disk, so nothing that may bill is lost.

One directory per run (`<state_dir>/runs/<run_id>/`) holding `record.json`: versioned JSON,
rewritten atomically before every create call and after every answer. A lease that may exist
is never dropped from it; a record with any lease not confirmed deleted is "open" and is
offered for re-attach or teardown when the app starts again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect

from mvp_tui.errors import UserError
from mvp_tui.lease.atomic import fsync_dir, write_atomic
from mvp_tui.providers.base import SshEndpoint

RECORD_VERSION = 1
RECORD_FILE = "record.json"

class CreateAttemptOutcome(enum.Enum):
    """How one create attempt was answered, as recorded."""

    PENDING = "pending"  # recorded before the call; no answer yet (a crash here may leave one)
    CREATED = "created"
    ADOPTED = "adopted"  # no clear answer, then found by its label
    AMBIGUOUS = "ambiguous"  # no clear answer and not found (yet)
    UNAVAILABLE = "unavailable"
    FORBIDDEN = "forbidden"
    REJECTED = "rejected"
    NO_CREDITS = "no_credits"
    AUTH_FAILED = "auth_failed"
    ERROR = "error"  # the provider call raised; handled like an unclear answer


class LeaseRecordState(enum.Enum):
    """Where a lease is in its life, as this app knows it."""

    CREATING = "creating"  # create call sent, no answer yet
    PENDING = "pending"  # exists, not running yet
    RUNNING = "running"
    DELETING = "deleting"  # destroy sent, not confirmed gone: may still bill
    DELETED = "deleted"  # confirmed gone by the provider
    UNKNOWN = "unknown"  # an unclear create: it may exist (looked up by its label)


class SecretState(enum.Enum):
    """Where an attempt's provider-side secret (RunPod: the pod's host key) is."""

    CREATING = "creating"  # recorded before the store call: a crash here may leave one
    STORED = "stored"  # on the account under `secret_id`: deleted once its instance is gone
    UNKNOWN = "unknown"  # no clear answer to the store call: it may exist, id unknown
    DELETED = "deleted"


class RecordError(UserError):
    """A run record cannot be read or used; names the file and what to do."""

    def __init__(self, path: Path, problem: str, fix: str = "") -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"run record {path}: {problem}",
            fix=fix
            or "check the provider's console for instances of this run, then move the file aside",
        )


class AttemptRecord(msgspec.Struct):
    """One create call: written before it is sent, updated with its answer."""

    label: str
    node_id: int
    number: int
    offer_id: str
    gpu_name: str
    price_per_hour: float
    started_at: float
    outcome: CreateAttemptOutcome = CreateAttemptOutcome.PENDING
    answered_at: float | None = None
    http_status: int | None = None
    detail: str = ""
    provider_id: str | None = None


class AgentLogMark(msgspec.Struct, frozen=True):
    """Where a run that left the agent running stopped reading its stdout/stderr logs
    (bytes): a re-attach resumes there, not from 0."""

    stdout: int
    stderr: int


class LeaseRecord(msgspec.Struct):
    """One instance that exists or may exist, until the provider confirms it gone."""

    provider: str
    label: str
    node_id: int
    offer_id: str
    gpu_name: str
    price_per_hour: float
    state: LeaseRecordState
    provider_id: str | None = None
    created_at: float | None = None
    running_at: float | None = None
    deleted_at: float | None = None
    ssh: SshEndpoint | None = None
    host_key: str | None = None  # OpenSSH public key pinned on first connect
    # A rotation's new key, installed over a verified session and not yet seen answering:
    # a connection that shows it settles it (a crash mid-rotation strands no re-attach).
    host_key_pending: str | None = None
    detail: str = ""
    # The agent's log mark, and the agent's engine verdict that run had seen.
    log_positions: AgentLogMark | None = None
    ready_record: str | None = None
    # Why its node was given up (a host failure before or while serving): stage, kind, reason.
    failure: str | None = None
    # Who deleted it, once DELETED: "mvp-tui" (our confirmed delete) or "node" (it was
    # already gone: the node's own switch or boot guard deleted it; seed DeletedBy::Watchdog).
    deleted_by: str | None = None
    # What the provider says the lease cost, where it publishes a figure (RunPod's billing).
    billed_usd: float | None = None

    @property
    def may_bill(self) -> bool:
        return self.state is not LeaseRecordState.DELETED


class SecretRecord(msgspec.Struct):
    """One attempt's secret on the provider's account: its name and id, never its value."""

    label: str  # the attempt whose instance refers to it
    name: str
    state: SecretState
    secret_id: str | None = None
    detail: str = ""

    @property
    def deletable(self) -> bool:
        """On the account with a known id: a delete can remove it."""
        return self.state is SecretState.STORED and self.secret_id is not None

    @property
    def may_remain(self) -> bool:
        return self.state is not SecretState.DELETED


class RunRecord(msgspec.Struct, kw_only=True):
    """Everything one run tried and leased; the type is the file's schema (`save`, `load`)."""

    version: int = RECORD_VERSION
    run_id: str
    provider: str
    label_prefix: str
    created_at: float
    # The install tag its labels carry (`lease/identity.py`); "" in records written before
    # tags, whose labels keep that shape (ours only as far as this record holds them).
    owner_tag: str = ""
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    attempts: list[AttemptRecord] = msgspec.field(default_factory=list)
    leases: list[LeaseRecord] = msgspec.field(default_factory=list)
    # Absent from records written before secrets existed: none were made then.
    secrets: list[SecretRecord] = msgspec.field(default_factory=list)
    # The last account check after a teardown (`lease/account_check.py` AccountCheck.to_json):
    # a receipt rebuilt from the record says it too. None in records older than checks.
    account_check: dict[str, Any] | None = None

    def lease_by_id(self, provider_id: str) -> LeaseRecord | None:
        return next((x for x in self.leases if x.provider_id == provider_id), None)

    def lease_by_label(self, label: str) -> LeaseRecord | None:
        return next((x for x in self.leases if x.label == label), None)

    def open_leases(self) -> list[LeaseRecord]:
        """Leases not confirmed deleted: each may still bill."""
        return [x for x in self.leases if x.may_bill]

    @property
    def is_open(self) -> bool:
        return any(x.may_bill for x in self.leases)

    def secrets_left(self) -> list[SecretRecord]:
        """Secrets that may still be on the account (they do not bill)."""
        return [s for s in self.secrets if s.may_remain]


# ---- JSON ----------------------------------------------------------------------------------


class _Versioned(msgspec.Struct):
    """A record's version alone, read before its fields (another version may differ in all)."""

    version: Any = None


_read_version = msgspec.json.Decoder(_Versioned).decode
_read_record = msgspec.json.Decoder(RunRecord).decode


def encode_record(record: RunRecord) -> bytes:
    """The record as the indented JSON document written to disk."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


def decode_record(path: Path, raw: bytes) -> RunRecord:
    """Parse a record document; RecordError names the file and the path of the bad field."""
    try:
        version = _read_version(raw).version
        if version != RECORD_VERSION:
            raise RecordError(
                path,
                f"record version {version!r} is not supported (this mvp-tui reads version "
                f"{RECORD_VERSION})",
                "use the mvp-tui version that wrote it, or check the provider's console by hand",
            )
        return _read_record(raw)
    except msgspec.ValidationError as exc:
        raise RecordError(path, _invalid(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise RecordError(path, f"is not valid JSON ({exc})") from None


def _invalid(message: str) -> str:
    """msgspec's `what - at `$.path`` as `$.path: what`, with an enum field's choices."""
    what, _, where = message.rpartition(" - at `")
    if not what:
        return message
    where = where.rstrip("`")
    allowed = _enum_values(where)
    return f"{where}: {what}" + (f" (must be one of {allowed})" if allowed else "")


def _enum_values(where: str) -> list[Any]:
    """The values of the enum field at msgspec's path `where` (`$.leases[0].state`), if any."""
    info: Any = msgspec.inspect.type_info(RunRecord)
    for part in where.replace("[", ".[").split(".")[1:]:
        if isinstance(info, msgspec.inspect.UnionType):  # `X | None`: the X
            info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
        if part.startswith("[") and isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        elif isinstance(info, msgspec.inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == part), None)
        else:
            return []
    return [m.value for m in info.cls] if isinstance(info, msgspec.inspect.EnumType) else []


# ---- the store -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Every run record found, and those that could not be read."""

    runs: list[RunRecord]
    errors: list[RecordError]


class RecordStore:
    """Run records under `state_dir/runs/`, one directory per run."""

    def __init__(self, state_dir: Path | str) -> None:
        self.state_dir = Path(state_dir)
        self.runs_dir = self.state_dir / "runs"

    def run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"run id {run_id!r} cannot name a directory")
        return self.runs_dir / run_id

    def record_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / RECORD_FILE

    def create_run(
        self,
        run_id: str,
        *,
        provider: str,
        label_prefix: str,
        created_at: float,
        owner_tag: str = "",
        config: Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Create the run's directory and first record. `config` must be redacted already."""
        self.runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        run_dir = self.run_dir(run_id)
        try:
            run_dir.mkdir(mode=0o700)
        except FileExistsError:
            raise RecordError(
                run_dir, "a run with this id exists already", "start the run with a new run id"
            ) from None
        fsync_dir(self.runs_dir)
        record = RunRecord(
            run_id=run_id,
            provider=provider,
            label_prefix=label_prefix,
            created_at=created_at,
            owner_tag=owner_tag,
            config=dict(config or {}),
        )
        self.save(record)
        return record

    def save(self, record: RunRecord) -> None:
        """Write the record atomically (old or new on disk, never half)."""
        path = self.record_path(record.run_id)
        try:
            write_atomic(path, encode_record(record))
        except OSError as exc:
            if exc.filename is not None:
                raise
            # A full disk names no file: name the record, so the error says where.
            raise OSError(exc.errno, exc.strerror, str(path)) from exc

    def load(self, run_id: str) -> RunRecord:
        """Read one run's record; RecordError names the file when it is missing or corrupt."""
        return self._load_path(self.record_path(run_id))

    def _load_path(self, path: Path) -> RunRecord:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise RecordError(
                path, "no such record", "check the run id (`mvp-tui ls --all` lists every run)"
            ) from None
        except OSError as exc:
            raise RecordError(path, f"cannot be read ({exc.strerror})") from None
        return decode_record(path, raw)

    def run_ids(self) -> list[str]:
        """Ids of every run directory holding a record, oldest name first."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if (p / RECORD_FILE).is_file())

    def scan(self) -> ScanResult:
        """Every record, collecting unreadable ones instead of stopping at the first."""
        runs: list[RunRecord] = []
        errors: list[RecordError] = []
        for run_id in self.run_ids():
            try:
                runs.append(self.load(run_id))
            except RecordError as exc:
                errors.append(exc)
        return ScanResult(runs, errors)

    def open_runs(self) -> list[RunRecord]:
        """Runs with any lease not confirmed deleted. Raises RecordError on a corrupt record,
        since skipping it could hide a lease that bills."""
        scan = self.scan()
        if scan.errors:
            raise scan.errors[0]
        return [run for run in scan.runs if run.is_open]

    def pin_host_key(self, run_id: str, provider_id: str, key_openssh: str) -> None:
        """Store the host key first seen on a lease (trust on first connect, per lease)."""
        record = self.load(run_id)
        lease = self._lease(record, provider_id)
        lease.host_key = key_openssh.strip()
        self.save(record)

    def propose_host_key(self, run_id: str, provider_id: str, key_openssh: str | None) -> None:
        """Note (None: forget) the key a rotation is about to install on a lease's node."""
        record = self.load(run_id)
        lease = self._lease(record, provider_id)
        lease.host_key_pending = None if key_openssh is None else key_openssh.strip()
        self.save(record)

    def settle_host_key(self, run_id: str, provider_id: str, key_openssh: str) -> None:
        """A rotation's key answered: pinned, and no longer pending (one atomic write)."""
        record = self.load(run_id)
        lease = self._lease(record, provider_id)
        lease.host_key, lease.host_key_pending = key_openssh.strip(), None
        self.save(record)

    def pending_host_key(self, run_id: str, provider_id: str) -> str | None:
        """A rotation's key not yet seen answering, or None."""
        return self._lease(self.load(run_id), provider_id).host_key_pending

    def mark_agent_log(
        self, run_id: str, provider_id: str, positions: AgentLogMark, ready_record: str | None
    ) -> None:
        """Store where reading the agent's logs stopped (a re-attach resumes there)."""
        record = self.load(run_id)
        lease = self._lease(record, provider_id)
        lease.log_positions = positions
        lease.ready_record = ready_record
        self.save(record)

    def pinned_host_key(self, run_id: str, provider_id: str) -> str | None:
        """The host key pinned for a lease, or None before the first connect."""
        return self._lease(self.load(run_id), provider_id).host_key

    def _lease(self, record: RunRecord, provider_id: str) -> LeaseRecord:
        lease = record.lease_by_id(provider_id)
        if lease is None:
            raise RecordError(
                self.record_path(record.run_id),
                f"no lease with provider id {provider_id!r} in run {record.run_id}",
                "pin host keys only for leases of this run",
            )
        return lease
