"""The walk's logic against a scripted in-memory provider (the must-show cases run against
FakeVast over HTTP in test_walk_vast.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from mvp_tui.events import RecordingSink
from mvp_tui.lease import (
    CreateAttemptOutcome,
    LeaseRecordState,
    LeaseWalk,
    RecordStore,
    WalkFailure,
)
from mvp_tui.lease import events as ev
from mvp_tui.providers.base import CreateRequest, Offer, Outcome
from mvp_tui.secrets import Redactor
from tests.lease.conftest import TAG, fast_settings
from tests.lease.scripted import ScriptedProvider, Step, offer
from tests.prompt.waiting import WaitingSink


def _walk(
    provider: ScriptedProvider, store: RecordStore, sink: RecordingSink, **settings: object
) -> LeaseWalk:
    return LeaseWalk(provider, store, sink, fast_settings(**settings), run_id="r-5ca1ab1e")


def kinds(sink: RecordingSink) -> list[str]:
    return [e.kind for e in sink.events]


async def test_a_created_lease_runs_and_is_recorded(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(polls_to_run=2), RecordingSink()
    result = await _walk(provider, store, sink).run([offer("1001")])
    assert result.ok and result.failure is None
    assert result.endpoint is not None and result.endpoint.port == 22022
    assert kinds(sink) == [
        "offer_picked",
        "attempt_started",
        "attempt_answered",
        "lease_pending",
        "lease_running",
    ]
    record = store.load("r-5ca1ab1e")
    (lease,) = record.leases
    assert lease.state is LeaseRecordState.RUNNING and lease.provider_id == "7001"
    assert lease.label == f"mvp-{TAG}-r-5ca1ab1e-1-1" and lease.ssh == result.endpoint
    assert record.attempts[0].outcome is CreateAttemptOutcome.CREATED
    assert provider.count("list") == 1  # the sweep after ready (quiet: nothing else found)


async def test_the_attempt_is_on_disk_before_the_create_call(store: RecordStore) -> None:
    seen: list[tuple[str, str, str]] = []

    def look(o: Offer, request: CreateRequest) -> None:
        record = store.load("r-5ca1ab1e")
        seen.append(
            (record.attempts[-1].outcome.value, record.leases[-1].state.value, request.label)
        )

    provider = ScriptedProvider(on_create=look)
    provider.answers["1001"] = Outcome.UNAVAILABLE
    await _walk(provider, store, RecordingSink()).run([offer("1001"), offer("1002")])
    assert seen == [
        ("pending", "creating", f"mvp-{TAG}-r-5ca1ab1e-1-1"),
        ("pending", "creating", f"mvp-{TAG}-r-5ca1ab1e-1-2"),
    ]


async def test_unavailable_and_forbidden_move_to_the_next_offer(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.answers.update({"1": Outcome.UNAVAILABLE, "2": Outcome.FORBIDDEN})
    result = await _walk(provider, store, sink).run([offer("1"), offer("2"), offer("3")])
    assert result.ok and result.lease is not None and result.lease.offer_id == "3"
    outcomes = [e.outcome for e in sink.of(ev.AttemptAnswered)]  # type: ignore[attr-defined]
    assert outcomes == ["unavailable", "forbidden", "created"]
    record = store.load("r-5ca1ab1e")
    assert [x.offer_id for x in record.leases] == ["3"]  # refusals leave no placeholder
    assert [a.outcome for a in record.attempts][:2] == [
        CreateAttemptOutcome.UNAVAILABLE,
        CreateAttemptOutcome.FORBIDDEN,
    ]


async def test_an_offer_over_the_cap_is_skipped_at_create_time(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    result = await _walk(provider, store, sink, max_price_per_hour=0.5).run(
        [offer("1", price=0.9), offer("2", price=0.4)]
    )
    assert result.ok and result.lease is not None and result.lease.offer_id == "2"
    (skipped,) = sink.of(ev.OfferSkipped)
    assert "over max_price_per_hour" in skipped.reason  # type: ignore[attr-defined]
    assert provider.calls[0] == ("create", f"mvp-{TAG}-r-5ca1ab1e-1-1")
    assert provider.count("create") == 1


@pytest.mark.parametrize(
    ("outcome", "failure", "fix"),
    [
        (Outcome.REJECTED, WalkFailure.REJECTED, "check image"),
        (Outcome.NO_CREDITS, WalkFailure.NO_CREDITS, "add credit"),
        (Outcome.AUTH_FAILED, WalkFailure.AUTH_FAILED, "api_key"),
    ],
)
async def test_a_stop_answer_ends_the_walk_with_its_reason(
    store: RecordStore, outcome: Outcome, failure: WalkFailure, fix: str
) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.answers["1"] = outcome
    result = await _walk(provider, store, sink).run([offer("1"), offer("2")])
    assert not result.ok and result.failure is failure
    assert fix in result.reason and "offer 1" in result.reason
    assert provider.count("create") == 1  # offer 2 never tried
    (failed,) = sink.of(ev.WalkFailed)
    assert failed.failure is failure  # type: ignore[attr-defined]
    assert result.may_bill == ()


async def test_an_unclear_create_that_made_an_instance_is_adopted(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.append(Step(Outcome.AMBIGUOUS, perform=True, http_status=500))
    result = await _walk(provider, store, sink).run([offer("1")])
    assert result.ok and provider.count("create") == 1
    assert provider.billing() == ["7001"]
    (rec,) = sink.of(ev.Reconciled)
    assert rec.adopted_id == "7001" and rec.destroyed == ()  # type: ignore[attr-defined]
    assert store.load("r-5ca1ab1e").attempts[0].outcome is CreateAttemptOutcome.ADOPTED


async def test_a_provider_error_on_create_is_reconciled_like_an_unclear_answer(
    store: RecordStore,
) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.append(Step(Outcome.AMBIGUOUS, perform=True, raises=True))
    result = await _walk(provider, store, sink).run([offer("1")])
    assert result.ok and provider.billing() == ["7001"]
    answered = sink.of(ev.AttemptAnswered)[0]
    assert answered.outcome == "error"  # type: ignore[attr-defined]


async def test_two_unclear_creates_then_the_next_offer(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.extend([Step(Outcome.AMBIGUOUS), Step(Outcome.AMBIGUOUS)])
    result = await _walk(provider, store, sink).run([offer("1"), offer("2")])
    assert result.ok and result.lease is not None and result.lease.offer_id == "2"
    assert [c[1] for c in provider.calls if c[0] == "create"] == [
        f"mvp-{TAG}-r-5ca1ab1e-1-1",
        f"mvp-{TAG}-r-5ca1ab1e-1-2",
        f"mvp-{TAG}-r-5ca1ab1e-1-3",
    ]
    record = store.load("r-5ca1ab1e")
    # The sweep listed the node and confirmed the unclear creates made nothing.
    assert [x.label for x in record.leases] == [f"mvp-{TAG}-r-5ca1ab1e-1-3"]
    assert not result.may_bill
    (sweep,) = sink.of(ev.Sweep)
    assert sweep.listed and sweep.found == ()  # type: ignore[attr-defined]


async def test_only_unclear_answers_fail_as_unanswered_and_keep_nothing(
    store: RecordStore,
) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.extend([Step(Outcome.AMBIGUOUS)] * 2)
    result = await _walk(provider, store, sink).run([offer("1")])
    assert result.failure is WalkFailure.UNANSWERED
    assert "may still appear" in result.reason


async def test_two_unclear_creates_that_both_made_instances_keep_one(
    store: RecordStore,
) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.extend(
        [Step(Outcome.AMBIGUOUS, perform=True), Step(Outcome.AMBIGUOUS, perform=True)]
    )
    provider.hidden_lists = 2  # the first create's instance shows only later
    result = await _walk(provider, store, sink).run([offer("1")])
    assert result.ok and result.lease is not None
    assert result.lease.provider_id == "7002"  # the second attempt's instance, by its label
    assert provider.billing() == ["7002"] and provider.destroyed == ["7001"]
    (rec,) = sink.of(ev.Reconciled)[1:]
    assert rec.destroyed == ("7001",)  # type: ignore[attr-defined]
    deleting = sink.of(ev.LeaseDeleting)[0]
    assert deleting.reason is ev.DeleteReason.DUPLICATE  # type: ignore[attr-defined]
    states = {x.provider_id: x.state for x in store.load("r-5ca1ab1e").leases}
    assert states == {"7001": LeaseRecordState.DELETED, "7002": LeaseRecordState.RUNNING}


async def test_a_stuck_lease_is_destroyed_and_the_next_offer_tried(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.stuck.add("1")
    result = await _walk(provider, store, sink, ready_timeout_s=0.05).run([offer("1"), offer("2")])
    assert result.ok and result.lease is not None and result.lease.offer_id == "2"
    assert provider.destroyed == ["7001"] and provider.billing() == ["7002"]
    (not_ready,) = sink.of(ev.LeaseNotReady)
    assert "after 0.05 s" in not_ready.reason  # type: ignore[attr-defined]
    (deleted,) = sink.of(ev.LeaseDeleted)
    assert deleted.provider_id == "7001"  # type: ignore[attr-defined]
    first = store.load("r-5ca1ab1e").lease_by_id("7001")
    assert first is not None and first.state is LeaseRecordState.DELETED


async def test_a_dead_lease_fails_at_once(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.dies.add("1")
    result = await _walk(provider, store, sink, ready_timeout_s=30.0).run([offer("1"), offer("2")])
    assert result.ok and provider.destroyed == ["7001"]
    assert provider.count("get") < 10  # did not wait for the 30 s timeout
    (not_ready,) = sink.of(ev.LeaseNotReady)
    assert "exited" in not_ready.reason  # type: ignore[attr-defined]


async def test_an_unconfirmed_delete_stops_the_walk(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.stuck.add("1")
    provider.undeletable.add("7001")
    result = await _walk(provider, store, sink, ready_timeout_s=0.02).run([offer("1"), offer("2")])
    assert result.failure is WalkFailure.DELETE_UNCONFIRMED
    assert provider.count("create") == 1  # no second lease while one may bill
    assert result.may_bill == (f"mvp-{TAG}-r-5ca1ab1e-1-1",)
    lease = store.load("r-5ca1ab1e").lease_by_id("7001")
    assert lease is not None and lease.state is LeaseRecordState.DELETING
    assert sink.of(ev.LeaseDeleteUnconfirmed) and not sink.of(ev.LeaseDeleted)


async def test_a_refusal_that_still_made_an_instance_destroys_it(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.append(Step(Outcome.UNAVAILABLE, perform=True, with_id=True))
    result = await _walk(provider, store, sink).run([offer("1"), offer("2")])
    assert result.ok and provider.destroyed == ["7001"] and provider.billing() == ["7002"]
    assert sink.of(ev.LeaseDeleting)[0].reason is ev.DeleteReason.UNWANTED  # type: ignore[attr-defined]


async def test_cancelling_the_walk_destroys_its_lease(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), WaitingSink()
    provider.stuck.add("1")
    walk = _walk(provider, store, sink, ready_timeout_s=30.0)
    task = asyncio.create_task(walk.run([offer("1")]))
    await sink.wait_for(ev.LeasePending)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.billing() == [] and provider.destroyed == ["7001"]
    reasons = [e.reason for e in sink.of(ev.LeaseDeleting)]  # type: ignore[attr-defined]
    assert reasons == [ev.DeleteReason.INTERRUPTED]
    assert not store.load("r-5ca1ab1e").is_open


async def test_no_offers_is_a_clear_failure(store: RecordStore) -> None:
    result = await _walk(ScriptedProvider(), store, RecordingSink()).run([])
    assert result.failure is WalkFailure.NO_OFFERS


async def test_each_offer_is_tried_once(store: RecordStore) -> None:
    provider = ScriptedProvider()
    provider.answers["1"] = Outcome.UNAVAILABLE
    result = await _walk(provider, store, RecordingSink()).run([offer("1"), offer("1")])
    assert result.failure is WalkFailure.EXHAUSTED and "offer 1 unavailable" in result.reason
    assert provider.count("create") == 1


async def test_a_record_that_cannot_be_written_means_no_create(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    walk = _walk(provider, store, sink)
    store.create_run(walk.run_id, provider="scripted", label_prefix="mvp", created_at=1.0)

    def full(record: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "save", full)
    result = await walk.run([offer("1")])
    assert result.failure is WalkFailure.RECORD_FAILED
    assert "No space left" in result.reason and "record.json" in result.reason
    assert provider.count("create") == 0


async def test_secrets_reach_neither_events_nor_records(store: RecordStore) -> None:
    secret = "hf_SECRETTOKEN_0123456789"
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.steps.append(
        Step(Outcome.AMBIGUOUS, perform=True, detail=f"upstream echoed {secret}", http_status=500)
    )
    walk = LeaseWalk(
        provider,
        store,
        sink,
        fast_settings(env={"HF_TOKEN": secret}),
        run_id="r-5ca1ab1e",
        config={"hf_token": "<redacted>"},
        redact=Redactor([secret]),
    )
    result = await walk.run([offer("1")])
    assert result.ok
    lines = "\n".join(e.to_json() for e in sink.events)
    assert secret not in lines and "<redacted>" in lines
    for path in store.state_dir.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text()
    assert json.loads(store.record_path("r-5ca1ab1e").read_text())["config"] == {
        "hf_token": "<redacted>"
    }


async def test_events_are_complete_json_lines(store: RecordStore) -> None:
    provider, sink = ScriptedProvider(), RecordingSink()
    provider.answers["1"] = Outcome.NO_CREDITS
    await _walk(provider, store, sink).run([offer("1")])
    lines = [json.loads(e.to_json()) for e in sink.events]
    assert [line["event"] for line in lines] == [
        "offer_picked",
        "attempt_started",
        "attempt_answered",
        "walk_failed",
    ]
    failed = lines[-1]
    assert failed["failure"] == "no_credits" and failed["run_id"] == "r-5ca1ab1e"
    assert failed["attempts"] == 1 and failed["at"] > 0
    assert lines[2]["outcome"] == "no_credits" and lines[2]["http_status"] == 400


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("poll_interval_s", 0.0),
        ("reconcile_waits_s", ()),
        ("max_price_per_hour", -1.0),
        ("destroy_attempts", 0),
        ("label_prefix", "has-dash"),
        ("max_ambiguous_per_offer", 0),
    ],
)
def test_bad_settings_name_the_key(key: str, value: object) -> None:
    name = "label_prefix" if key == "label_prefix" else key
    with pytest.raises(ValueError, match=name):
        fast_settings(**{key: value})
