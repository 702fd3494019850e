"""Run records: what a run tried and what it leased, on disk, so nothing that may bill is lost.

One directory per run (`<state_dir>/runs/<run_id>/`) holding `record.json`: versioned JSON,
rewritten atomically before every create call and after every answer. A lease that may exist
is never dropped from it; a record with any lease not confirmed deleted is "open" and is
offered for re-attach or teardown when the app starts again.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mvp_tui.errors import UserError
from mvp_tui.lease.atomic import fsync_dir, write_atomic
from mvp_tui.providers.base import SshEndpoint

RECORD_VERSION = 1
RECORD_FILE = "record.json"

_E = TypeVar("_E", bound=enum.Enum)


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


@dataclass(slots=True)
class AttemptRecord:
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


@dataclass(slots=True)
class LeaseRecord:
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
    # Where a run that left the agent running stopped reading its stdout/stderr logs (bytes),
    # and the agent's engine verdict it had seen: a re-attach resumes there, not from 0.
    log_positions: tuple[int, int] | None = None
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


@dataclass(slots=True)
class SecretRecord:
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


@dataclass(slots=True)
class RunRecord:
    """Everything one run tried and leased."""

    run_id: str
    provider: str
    label_prefix: str
    created_at: float
    config: dict[str, Any] = field(default_factory=dict)
    attempts: list[AttemptRecord] = field(default_factory=list)
    leases: list[LeaseRecord] = field(default_factory=list)
    secrets: list[SecretRecord] = field(default_factory=list)
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


# ---- JSON encoding -------------------------------------------------------------------------


def _ssh_to_json(ssh: SshEndpoint | None) -> dict[str, Any] | None:
    if ssh is None:
        return None
    return {"host": ssh.host, "port": ssh.port, "user": ssh.user, "via": ssh.via}


def record_to_json(record: RunRecord) -> dict[str, Any]:
    """The record as the JSON document written to disk."""
    return {
        "version": RECORD_VERSION,
        "run_id": record.run_id,
        "provider": record.provider,
        "label_prefix": record.label_prefix,
        "created_at": record.created_at,
        "config": record.config,
        "attempts": [
            {
                "label": a.label,
                "node_id": a.node_id,
                "number": a.number,
                "offer_id": a.offer_id,
                "gpu_name": a.gpu_name,
                "price_per_hour": a.price_per_hour,
                "started_at": a.started_at,
                "outcome": a.outcome.value,
                "answered_at": a.answered_at,
                "http_status": a.http_status,
                "detail": a.detail,
                "provider_id": a.provider_id,
            }
            for a in record.attempts
        ],
        "leases": [
            {
                "provider": x.provider,
                "label": x.label,
                "node_id": x.node_id,
                "offer_id": x.offer_id,
                "gpu_name": x.gpu_name,
                "price_per_hour": x.price_per_hour,
                "state": x.state.value,
                "provider_id": x.provider_id,
                "created_at": x.created_at,
                "running_at": x.running_at,
                "deleted_at": x.deleted_at,
                "ssh": _ssh_to_json(x.ssh),
                "host_key": x.host_key,
                "host_key_pending": x.host_key_pending,
                "detail": x.detail,
                "log_positions": (
                    None
                    if x.log_positions is None
                    else {"stdout": x.log_positions[0], "stderr": x.log_positions[1]}
                ),
                "ready_record": x.ready_record,
                "failure": x.failure,
                "deleted_by": x.deleted_by,
                "billed_usd": x.billed_usd,
            }
            for x in record.leases
        ],
        "secrets": [
            {
                "label": s.label,
                "name": s.name,
                "state": s.state.value,
                "secret_id": s.secret_id,
                "detail": s.detail,
            }
            for s in record.secrets
        ],
        "account_check": record.account_check,
    }


class _Fields:
    """Typed reads from one JSON object, with errors naming the file and the field."""

    def __init__(self, path: Path, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise RecordError(path, f"{where or 'the document'} must be a JSON object")
        self.path, self.where, self.data = path, where, data

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, check: Callable[[Any], bool], what: str, optional: bool) -> Any:
        if key not in self.data:
            if optional:
                return None
            raise RecordError(self.path, f"field {self._name(key)!r} is missing")
        value = self.data[key]
        if value is None and optional:
            return None
        if not check(value):
            raise RecordError(
                self.path, f"field {self._name(key)!r} must be {what}, got {value!r:.80}"
            )
        return value

    def text(self, key: str) -> str:
        return str(self._get(key, lambda v: isinstance(v, str), "a string", False))

    def opt_text(self, key: str) -> str | None:
        value = self._get(key, lambda v: isinstance(v, str), "a string or null", True)
        return None if value is None else str(value)

    def integer(self, key: str) -> int:
        return int(self._get(key, _is_int, "an integer", False))

    def opt_integer(self, key: str) -> int | None:
        value = self._get(key, _is_int, "an integer or null", True)
        return None if value is None else int(value)

    def number(self, key: str) -> float:
        return float(self._get(key, _is_number, "a number", False))

    def opt_number(self, key: str) -> float | None:
        value = self._get(key, _is_number, "a number or null", True)
        return None if value is None else float(value)

    def choice(self, key: str, enum_type: type[_E]) -> _E:
        allowed = [m.value for m in enum_type]
        value = self._get(key, lambda v: v in allowed, f"one of {allowed}", False)
        return enum_type(value)

    def obj(self, key: str) -> _Fields | None:
        value = self._get(key, lambda v: isinstance(v, dict), "an object or null", True)
        return None if value is None else _Fields(self.path, self._name(key), value)

    def items(self, key: str) -> list[_Fields]:
        value = self._get(key, lambda v: isinstance(v, list), "a list", False)
        return [_Fields(self.path, f"{self._name(key)}[{i}]", v) for i, v in enumerate(value)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positions_from_json(f: _Fields | None) -> tuple[int, int] | None:
    return None if f is None else (f.integer("stdout"), f.integer("stderr"))


def _ssh_from_json(f: _Fields | None) -> SshEndpoint | None:
    if f is None:
        return None
    return SshEndpoint(
        host=f.text("host"), port=f.integer("port"), user=f.text("user"), via=f.text("via")
    )


def record_from_json(path: Path, data: Any) -> RunRecord:
    """Parse a record document; RecordError names the file and the bad field."""
    top = _Fields(path, "", data)
    version = top.data.get("version")
    if version != RECORD_VERSION:
        raise RecordError(
            path,
            f"record version {version!r} is not supported (this mvp-tui reads version "
            f"{RECORD_VERSION})",
            "use the mvp-tui version that wrote it, or check the provider's console by hand",
        )
    config = top.data.get("config", {})
    if not isinstance(config, dict):
        raise RecordError(path, "field 'config' must be an object")
    attempts = [
        AttemptRecord(
            label=a.text("label"),
            node_id=a.integer("node_id"),
            number=a.integer("number"),
            offer_id=a.text("offer_id"),
            gpu_name=a.text("gpu_name"),
            price_per_hour=a.number("price_per_hour"),
            started_at=a.number("started_at"),
            outcome=a.choice("outcome", CreateAttemptOutcome),
            answered_at=a.opt_number("answered_at"),
            http_status=a.opt_integer("http_status"),
            detail=a.text("detail"),
            provider_id=a.opt_text("provider_id"),
        )
        for a in top.items("attempts")
    ]
    leases = [
        LeaseRecord(
            provider=x.text("provider"),
            label=x.text("label"),
            node_id=x.integer("node_id"),
            offer_id=x.text("offer_id"),
            gpu_name=x.text("gpu_name"),
            price_per_hour=x.number("price_per_hour"),
            state=x.choice("state", LeaseRecordState),
            provider_id=x.opt_text("provider_id"),
            created_at=x.opt_number("created_at"),
            running_at=x.opt_number("running_at"),
            deleted_at=x.opt_number("deleted_at"),
            ssh=_ssh_from_json(x.obj("ssh")),
            host_key=x.opt_text("host_key"),
            host_key_pending=x.opt_text("host_key_pending"),
            detail=x.text("detail"),
            log_positions=_positions_from_json(x.obj("log_positions")),
            ready_record=x.opt_text("ready_record"),
            failure=x.opt_text("failure"),
            deleted_by=x.opt_text("deleted_by"),
            billed_usd=x.opt_number("billed_usd"),
        )
        for x in top.items("leases")
    ]
    # Absent from records written before secrets existed: none were made then.
    secrets = [
        SecretRecord(
            label=s.text("label"),
            name=s.text("name"),
            state=s.choice("state", SecretState),
            secret_id=s.opt_text("secret_id"),
            detail=s.text("detail"),
        )
        for s in (top.items("secrets") if "secrets" in top.data else [])
    ]
    # Absent from records written before account checks; unreadable counts as none.
    check = top.data.get("account_check")
    return RunRecord(
        run_id=top.text("run_id"),
        provider=top.text("provider"),
        label_prefix=top.text("label_prefix"),
        created_at=top.number("created_at"),
        config=config,
        attempts=attempts,
        leases=leases,
        secrets=secrets,
        account_check=check if isinstance(check, dict) else None,
    )


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
            config=dict(config or {}),
        )
        self.save(record)
        return record

    def save(self, record: RunRecord) -> None:
        """Write the record atomically (old or new on disk, never half)."""
        text = json.dumps(record_to_json(record), indent=2, ensure_ascii=False) + "\n"
        path = self.record_path(record.run_id)
        try:
            write_atomic(path, text.encode("utf-8"))
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
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordError(path, f"is not valid JSON ({exc})") from None
        return record_from_json(path, data)

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
        self, run_id: str, provider_id: str, positions: tuple[int, int], ready_record: str | None
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
