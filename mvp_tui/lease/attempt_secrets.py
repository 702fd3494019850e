"""An attempt's provider-side secret (RunPod: its pod's private host key), from before the
create until its instance is gone.

The secret's name is recorded (CREATING) in the same atomic save as the attempt, and its id
is saved before the create is sent, so a crash at any point leaves a record that finds it.
It is deleted once no lease of its label may bill any more: after a confirmed teardown, a
clear refusal of the create, a sweep that found nothing under the label, `down`, and the
restart check. A delete is retried like a destroy; one that keeps failing, or a secret whose
id is unknown, is named (`SecretLeftOver`, with how to remove it by hand): a secret does not
bill, so it is a warning, never exit code 3.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection

from mvp_tui.events import EventSink
from mvp_tui.lease.events import SecretDeleted, SecretLeftOver, SecretStored
from mvp_tui.lease.records import (
    LeaseRecord,
    LeaseRecordState,
    RecordStore,
    RunRecord,
    SecretRecord,
    SecretState,
)
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.base import (
    AttemptSecrets,
    DestroyOutcome,
    DestroyResult,
    Provider,
    ProviderError,
    SecretOutcome,
    StoredSecret,
)
from mvp_tui.untrusted import one_line_ascii

Clock = Callable[[], float]
LeaseFilter = Callable[[LeaseRecord], bool]
_UNKNOWN_ID = "its store call got no clear answer, so its id is unknown"


def keeper(provider: Provider) -> AttemptSecrets | None:
    """The provider as a keeper of attempt secrets, or None (Vast, Docker, local)."""
    return provider if isinstance(provider, AttemptSecrets) else None


def begin(provider: Provider, record: RunRecord, label: str) -> SecretRecord | None:
    """Record attempt `label`'s secret as CREATING (the caller saves it with the attempt),
    or None when this provider or attempt needs none."""
    secrets = keeper(provider)
    name = secrets.secret_name(label) if secrets is not None else None
    if name is None:
        return None
    secret = SecretRecord(label=label, name=name, state=SecretState.CREATING)
    record.secrets.append(secret)
    return secret


async def store(
    provider: Provider,
    records: RecordStore,
    record: RunRecord,
    secret: SecretRecord,
    sink: EventSink,
    clock: Clock = time.time,
) -> StoredSecret:
    """Store the secret, then save the answer (its id) before anything else happens. A
    clear refusal drops the secret from the record; no clear answer keeps it as UNKNOWN."""
    secrets = keeper(provider)
    if secrets is None:
        raise ValueError(f"provider {provider.info.name} keeps no attempt secrets")
    try:
        answer = await secrets.store_secret(secret.label)
    except ProviderError as exc:
        answer = StoredSecret(SecretOutcome.UNCLEAR, None, one_line_ascii(str(exc)), None)
    if answer.outcome is SecretOutcome.STORED:
        secret.state, secret.secret_id, secret.detail = SecretState.STORED, answer.secret_id, ""
    elif answer.outcome is SecretOutcome.UNCLEAR:
        secret.state, secret.detail = SecretState.UNKNOWN, f"unclear store: {answer.detail}"
    else:
        record.secrets.remove(secret)
    records.save(record)
    if answer.outcome is SecretOutcome.STORED:
        sink(SecretStored(at=clock(), run_id=record.run_id, label=secret.label, name=secret.name))
    return answer


def _may_bill(lease: LeaseRecord) -> bool:
    return lease.may_bill


def sent_creates(lease: LeaseRecord) -> bool:
    """A lease whose create went out (a placeholder still CREATING never sent one)."""
    return lease.may_bill and not (
        lease.provider_id is None and lease.state is LeaseRecordState.CREATING
    )


async def release(
    provider: Provider,
    records: RecordStore,
    record: RunRecord,
    sink: EventSink,
    settings: WalkSettings,
    *,
    labels: Collection[str] | None = None,
    name_unknown: bool = True,
    blocking: LeaseFilter = _may_bill,
    clock: Clock = time.time,
) -> list[SecretLeftOver]:
    """Delete every secret (of `labels`, when given) whose instance is gone: no lease under
    its label that `blocking` holds (by default: may bill). Returns (and emits) what is left
    on the account; never raises, since a secret must never stop a teardown."""
    secrets = keeper(provider)
    if secrets is None or not record.secrets:
        return []
    busy = {lease.label for lease in record.leases if blocking(lease)}
    left: list[SecretLeftOver] = []
    for secret in record.secrets:
        if not secret.may_remain or secret.label in busy:
            continue
        if labels is not None and secret.label not in labels:
            continue
        if not secret.deletable:
            if name_unknown:
                left.append(_left(secrets, record, secret, _UNKNOWN_ID, clock))
            continue
        result, failures = await _delete(secrets, secret.secret_id or "", settings)
        if result.outcome is DestroyOutcome.FAILED:
            why = f"delete failed {failures} times (last: {_answer(result)})"
            secret.detail = why
            left.append(_left(secrets, record, secret, why, clock))
            continue
        secret.state, secret.detail = SecretState.DELETED, "deleted"
        sink(SecretDeleted(at=clock(), run_id=record.run_id, label=secret.label, name=secret.name))
    with contextlib.suppress(OSError):  # the provider's answer stands; a later pass corrects
        records.save(record)
    for event in left:
        sink(event)
    return left


async def _delete(
    secrets: AttemptSecrets, secret_id: str, settings: WalkSettings
) -> tuple[DestroyResult, int]:
    """One delete, FAILED answers retried with the destroy's back-off."""
    failures = 0
    while True:
        try:
            result = await secrets.delete_secret(secret_id)
        except ProviderError as exc:
            result = DestroyResult(DestroyOutcome.FAILED, one_line_ascii(str(exc)), exc.http_status)
        if result.outcome is not DestroyOutcome.FAILED:
            return result, failures
        failures += 1
        if failures >= settings.destroy_attempts:
            return result, failures
        await settings.sleep(settings.destroy_backoff(failures))


def _answer(result: DestroyResult) -> str:
    status = f"HTTP {result.http_status}" if result.http_status is not None else "no answer"
    return f"{status}: {result.detail}" if result.detail else status


def _left(
    secrets: AttemptSecrets, record: RunRecord, secret: SecretRecord, why: str, clock: Clock
) -> SecretLeftOver:
    fix = f"`mvp-tui down {record.run_id} --yes` retries it; by hand: " + secrets.secret_removal(
        secret.name, secret.secret_id
    )
    return SecretLeftOver(
        at=clock(),
        run_id=record.run_id,
        label=secret.label,
        name=secret.name,
        secret_id=secret.secret_id,
        reason=one_line_ascii(why, 400),
        fix=fix,
    )
