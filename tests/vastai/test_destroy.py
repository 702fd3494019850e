"""destroy against FakeVast: accepted, already gone, failures, rate limits."""

from __future__ import annotations

import pytest

from mvp_tui.providers.base import DestroyOutcome, LeaseState
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault


async def test_destroy_accepted_stops_billing(fake: FakeVast, provider: VastAiProvider) -> None:
    lease = fake.add_instance(label="mvp-a")
    result = await provider.destroy(str(lease))
    assert (result.outcome, result.http_status) == (DestroyOutcome.ACCEPTED, 200)
    assert fake.billing() == []
    assert fake.destroyed() == [lease]
    (request,) = [r for r in fake.requests if r.method == "DELETE"]
    assert (request.path, request.body) == (f"/api/v0/instances/{lease}/", {})


async def test_destroy_twice_is_gone(fake: FakeVast, provider: VastAiProvider) -> None:
    lease = str(fake.add_instance(label="mvp-a"))
    await provider.destroy(lease)
    again = await provider.destroy(lease)
    assert (again.outcome, again.http_status) == (DestroyOutcome.GONE, 404)
    assert "no_such_instance" in again.detail


@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        (Fault(status=404, body={"success": False, "error": "not_found"}), DestroyOutcome.GONE),
        (
            Fault(status=400, body={"success": False, "error": "no_such_instance", "msg": "x"}),
            DestroyOutcome.GONE,
        ),
        (Fault(status=200, body={"success": False, "msg": "try later"}), DestroyOutcome.FAILED),
        (Fault(status=200, body="not json"), DestroyOutcome.FAILED),
        (Fault(status=500), DestroyOutcome.FAILED),
        (Fault(status=403), DestroyOutcome.FAILED),
        (Fault(status=401), DestroyOutcome.FAILED),
        (Fault(status=404, body={"msg": "Invalid user key"}), DestroyOutcome.FAILED),
        (Fault(drop=True), DestroyOutcome.FAILED),
        # A 404 that is not Vast's JSON (a proxy page, a wrong api_url) proves nothing.
        (Fault(status=404, body="<html>Not Found</html>"), DestroyOutcome.FAILED),
    ],
    ids=lambda v: v.value if isinstance(v, DestroyOutcome) else f"{v.status}-{v.drop}",
)
async def test_destroy_answer_classes(
    fake: FakeVast, provider: VastAiProvider, fault: Fault, outcome: DestroyOutcome
) -> None:
    lease = fake.add_instance(label="mvp-a")
    fake.script("destroy", fault)
    result = await provider.destroy(str(lease))
    assert result.outcome is outcome, result
    assert len(fake.billing()) == 1  # none of these destroyed it


async def test_auth_failure_on_destroy_says_what_to_fix(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    lease = fake.add_instance(label="mvp-a")
    fake.script("destroy", Fault(status=401))
    result = await provider.destroy(str(lease))
    assert result.outcome is DestroyOutcome.FAILED
    assert "api_key" in result.detail


async def test_fail_destroy_then_retry_succeeds(fake: FakeVast, provider: VastAiProvider) -> None:
    lease = fake.add_instance(label="mvp-a")
    other = fake.add_instance(label="mvp-b")
    fake.fail_destroy(lease, times=2, status=503)
    first = await provider.destroy(str(lease))
    assert (first.outcome, first.http_status) == (DestroyOutcome.FAILED, 503)
    assert (await provider.destroy(str(other))).outcome is DestroyOutcome.ACCEPTED
    assert (await provider.destroy(str(lease))).outcome is DestroyOutcome.FAILED
    assert (await provider.destroy(str(lease))).outcome is DestroyOutcome.ACCEPTED
    assert (await provider.get(str(lease))).state is LeaseState.GONE


async def test_rate_limited_destroy_is_retried(fake: FakeVast, provider: VastAiProvider) -> None:
    lease = fake.add_instance(label="mvp-a")
    fake.rate_limit("destroy", 2)
    assert (await provider.destroy(str(lease))).outcome is DestroyOutcome.ACCEPTED
    assert sum(r.method == "DELETE" for r in fake.requests) == 3


async def test_rate_limit_that_outlasts_retries_is_failed_not_raised(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    lease = fake.add_instance(label="mvp-a")
    fake.rate_limit("destroy", 10)
    result = await provider.destroy(str(lease))
    assert (result.outcome, result.http_status) == (DestroyOutcome.FAILED, 429)
    assert len(fake.billing()) == 1


async def test_lost_answer_after_destroy_is_failed_then_gone(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """The walk retries a FAILED destroy; the retry then finds it already gone."""
    lease = str(fake.add_instance(label="mvp-a"))
    fake.script("destroy", Fault(perform=True, drop=True))
    assert (await provider.destroy(lease)).outcome is DestroyOutcome.FAILED
    assert (await provider.destroy(lease)).outcome is DestroyOutcome.GONE
