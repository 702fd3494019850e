"""The pod's host key travels as a RunPod secret (issue 22, "as in seed 003"): stored before
the create and recorded with its id, only its reference in the pod's env, deleted once the
pod is gone; a crash before the create leaves a record `down` cleans up; a delete that keeps
failing is retried and named (a warning: a secret does not bill)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore, WalkFailure, down, reconcile_open_runs, teardown
from mvp_tui.lease import events as ev
from mvp_tui.lease.records import CreateAttemptOutcome, SecretState
from mvp_tui.providers.base import CreateRequest, CreateResult, Offer, SelectionPolicy
from mvp_tui.providers.runpod.client import HOST_KEY_ENV, RunPodProvider
from mvp_tui.providers.runpod.secrets import secret_name, secret_reference
from tests.fakes.runpod_server import FakeRunPod, Fault
from tests.lease.conftest import fast_settings
from tests.runpod.conftest import make_provider

POLICY = SelectionPolicy(require_verified=False)


def state_text(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))


async def test_the_create_sends_only_the_reference_and_the_key_only_as_the_secrets_value(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-5ec0001")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None
        (create,) = fake.create_requests()
        (secret,) = fake.secrets()
        (key,) = fake.secret_values()
        assert secret["name"] == secret_name(result.lease.label)
        assert create.body["env"][HOST_KEY_ENV] == secret_reference(secret["name"])
        (store_call,) = [r for r in fake.secret_requests() if r.method == "POST"]
        assert store_call.body["value"] == key
        # The key in no other request body, no answer, no record, no event.
        others = [x for x in fake.exchanges if x.request is not store_call]
        assert all(key not in json.dumps(x.request.body) for x in others)
        assert all(key not in json.dumps(x.body) for x in fake.exchanges)
        without_value = {k: v for k, v in store_call.body.items() if k != "value"}
        assert key not in json.dumps(without_value)
        assert key not in state_text(tmp_path) and all(key not in str(e) for e in sink.events)
        # The pod boots with the key: RunPod fills the reference in.
        assert fake.container_env(result.lease.provider_id or "")[HOST_KEY_ENV] == key
        (stored,) = sink.of(ev.SecretStored)
        assert stored.name == secret["name"]
    finally:
        await provider.aclose()


async def test_each_attempts_secret_goes_once_its_pod_is_gone(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """Refused create → its secret at once; a pod that never gets SSH → after its delete;
    the serving pod's → only after the teardown confirmed it gone."""
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        fake.no_capacity(offers[0].offer_id.split(":", 1)[1])
        fake.running_without_ssh(10**6)
        walk = LeaseWalk(provider, store, sink, fast_settings(ready_timeout_s=0.1),
                         run_id="r-5ec0002")
        result = await walk.run(offers[:2])
        assert result.failure is WalkFailure.EXHAUSTED
        # The walk goes on past the two offers handed over (seed 003: every GPU type).
        tried = len(result.attempts)
        assert tried >= 2
        assert fake.pods() == [] and fake.secrets() == [] and len(fake.deleted_secrets) == tried
        record = store.load("r-5ec0002")
        assert [s.state for s in record.secrets] == [SecretState.DELETED] * tried
        fake.show_ssh()
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-5ec0003")
        result = await walk.run(offers[2:])
        assert result.ok and result.lease is not None
        assert len(fake.secrets()) == 1, "a live pod keeps its secret (a restart needs it)"
        fake.fail_delete(result.lease.provider_id, 1)
        ok = await teardown(provider, store, walk.run_id, result.lease.provider_id or "", sink,
                            fast_settings())
        assert ok and fake.pods() == [] and fake.secrets() == []
        # Deleted after the pod, never before it.
        pod_gone = max(x.at for x in fake.exchanges if x.op == "delete" and x.status == 204)
        secret_gone = max(x.at for x in fake.exchanges if x.op == "secret_delete")
        assert secret_gone >= pod_gone
    finally:
        await provider.aclose()


class Crash(BaseException):
    """The process dies (kill -9) at the moment the pod's create would go out."""


class CrashingProvider(RunPodProvider):
    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        raise Crash


async def test_a_crash_between_the_secret_and_the_create_leaves_a_record_down_cleans(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    crashing = CrashingProvider(api_key=fake.api_key, api_url=fake.api_url)
    try:
        offers = await crashing.search_offers(POLICY)
        walk = LeaseWalk(crashing, store, sink, fast_settings(), run_id="r-5ec0004")
        with pytest.raises(Crash):
            await walk.run(offers[:1])
    finally:
        await crashing.aclose()
    (secret,) = fake.secrets()
    assert fake.create_requests() == []
    (recorded,) = store.load("r-5ec0004").secrets
    assert (recorded.name, recorded.secret_id, recorded.state) == (
        secret["name"], secret["id"], SecretState.STORED)
    provider = make_provider(fake)  # a later `mvp-tui down --all`, from the record alone
    try:
        report = await down(provider, store, None, sink, fast_settings())
    finally:
        await provider.aclose()
    assert report.ok and report.secrets_left == ()
    assert fake.secrets() == [] and fake.deleted_secrets == [secret["id"]]
    assert store.load("r-5ec0004").secrets[0].state is SecretState.DELETED


async def test_a_failing_secret_delete_is_retried_then_named_and_down_retries_it(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    settings = fast_settings()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-5ec0005")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None
        (secret,) = fake.secrets()
        fake.script("secret_delete", *[Fault(status=503)] * settings.destroy_attempts)
        ok = await teardown(provider, store, walk.run_id, result.lease.provider_id or "", sink,
                            settings)
        assert ok, "the pod is gone: a secret left over does not make the teardown fail"
        deletes = [x for x in fake.exchanges if x.op == "secret_delete"]
        assert [x.status for x in deletes] == [503] * settings.destroy_attempts
        (left,) = sink.of(ev.SecretLeftOver)
        assert (left.name, left.secret_id, left.run_id) == (secret["name"], secret["id"],
                                                            "r-5ec0005")
        assert "503" in left.reason and f"mvp-tui down {walk.run_id}" in left.fix
        assert f"/account/secrets/{secret['id']}" in left.fix and fake.api_key not in left.fix
        (recorded,) = store.load(walk.run_id).secrets
        assert recorded.state is SecretState.STORED
        # `down --all` finds the run by its secret alone (no pod left) and deletes it.
        report = await down(provider, store, None, sink, settings)
        assert report.ok and report.secrets_left == () and fake.secrets() == []
    finally:
        await provider.aclose()


async def test_down_names_a_secret_it_cannot_delete_without_failing(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    settings = fast_settings()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-5ec0006")
        assert (await walk.run(offers[:1])).ok
        fake.script("secret_delete", *[Fault(status=500)] * settings.destroy_attempts)
        report = await down(provider, store, walk.run_id, sink, settings)
        assert report.ok, "a secret does not bill: no exit code 3"
        assert fake.pods() == [] and len(fake.secrets()) == 1
        deletes = [x for x in fake.exchanges if x.op == "secret_delete"]
        assert len(deletes) == settings.destroy_attempts, "retried, and only once over"
        (left,) = report.secrets_left
        assert left.name == fake.secrets()[0]["name"] and "500" in left.reason
    finally:
        await provider.aclose()


async def test_the_restart_check_deletes_the_secret_of_a_pod_that_deleted_itself(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-5ec0007")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None
        # The node's switch deletes its pod: the record still holds it as running.
        await provider.destroy(result.lease.provider_id or "")
        assert fake.pods() == [] and len(fake.secrets()) == 1
        found = await reconcile_open_runs(provider, store, settings=fast_settings(), sink=sink)
        assert [o.exists for o in found] == [False]
        assert fake.secrets() == [] and sink.of(ev.SecretDeleted)
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("status", "failure"), [(500, WalkFailure.PROVIDER_ERROR), (401, WalkFailure.AUTH_FAILED)]
)
async def test_no_create_is_sent_when_the_secret_cannot_be_stored(
    fake: FakeRunPod, tmp_path: Path, status: int, failure: WalkFailure
) -> None:
    """Without its secret the pod could never present the pinned key: no create goes out,
    and a secret that may exist (no clear answer) is named."""
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        fake.script("secret_create", Fault(status=status, perform=status >= 500))
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-5ec0008")
        result = await walk.run(offers)
        assert result.failure is failure and "no create was sent" in result.reason
        assert fake.create_requests() == [] and fake.pods() == []
        (attempt,) = result.attempts
        refused = CreateAttemptOutcome.REJECTED
        assert attempt.outcome is (CreateAttemptOutcome.AUTH_FAILED if status == 401 else refused)
        record = store.load("r-5ec0008")
        assert not record.is_open
        if status >= 500:  # it was made, but the answer said nothing: named, id unknown
            (left,) = sink.of(ev.SecretLeftOver)
            assert left.secret_id is None and "RunPod console" in left.fix
            assert [s.state for s in record.secrets] == [SecretState.UNKNOWN]
        else:
            assert record.secrets == [] and not sink.of(ev.SecretLeftOver)
        assert all(v not in state_text(tmp_path) for v in fake.secret_values())
    finally:
        await provider.aclose()


def test_the_down_command_warns_of_a_secret_left_with_its_remedy_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from mvp_tui.commands import down as command
    from mvp_tui.lease import DownReport

    left = ev.SecretLeftOver(
        run_id="r-5ec0009", label="mvp-r-5ec0009-1-1", name="mvp_host_key_x", secret_id="sec9",
        reason="delete failed 6 times (last: HTTP 500)", fix="`mvp-tui down r-5ec0009 --yes` …",
    )

    async def report(config: object, run_id: str | None, *_: object) -> DownReport:
        return DownReport((), (), (), (), (left,))

    monkeypatch.setattr(command, "_down", report)
    args = argparse.Namespace(run="r-5ec0009", all=False, yes=True)
    assert command.run(None, args) == 0  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "warning: secret mvp_host_key_x (id sec9) of run r-5ec0009" in err
    assert "does not bill" in err and "mvp-tui down r-5ec0009 --yes" in err
