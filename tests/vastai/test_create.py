"""Create: the body sent, and every answer class mapped to its Outcome."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    Offer,
    Outcome,
    ProviderError,
    SelectionPolicy,
)
from mvp_tui.providers.vastai.boot import vast_onstart
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault

REQUEST = CreateRequest(
    label="mvp-r7f3a-n1",
    image="ghcr.io/example/node:1",
    env={"MVP_RUN_ID": "r7f3a", "MVP_NODE": "1"},
    disk_gb=40,
    onstart="echo started > /tmp/onstart",
)


async def _offer(fake: FakeVast, provider: VastAiProvider, **fields: Any) -> Offer:
    offer_id = fake.add_offer(**fields)
    offers = await provider.search_offers(SelectionPolicy(require_verified=False))
    return next(o for o in offers if o.offer_id == str(offer_id))


async def _create(fake: FakeVast, provider: VastAiProvider, *faults: Fault) -> CreateResult:
    offer = await _offer(fake, provider)
    fake.script("create", *faults)
    return await provider.create(offer, REQUEST)


async def test_create_sends_the_documented_body(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    offer = await _offer(fake, provider)
    request = CreateRequest(
        label=REQUEST.label,
        image=REQUEST.image,
        env=REQUEST.env,
        disk_gb=40,
        onstart=REQUEST.onstart,
        ssh_public_key=public_key,
    )
    result = await provider.create(offer, request)

    assert result.outcome is Outcome.CREATED
    (put,) = [r for r in fake.requests if r.method == "PUT"]
    assert put.path == f"/api/v0/asks/{offer.offer_id}/"
    assert put.body == {
        "client_id": "me",
        "image": "ghcr.io/example/node:1",
        "env": {"MVP_RUN_ID": "r7f3a", "MVP_NODE": "1", "SSH_PUBLIC_KEY": public_key},
        "disk": 40.0,
        "label": "mvp-r7f3a-n1",
        "runtype": "ssh_direc ssh_proxy",
        "cancel_unavail": True,
        # The boot guard first, then the user's own (kept apart from any bootstrap command).
        "onstart": vast_onstart("echo started > /tmp/onstart"),
    }
    assert put.body["onstart"].endswith("\necho started > /tmp/onstart\n")
    assert "price" not in put.body  # on-demand, never a bid


async def test_created_instance_exists_with_the_label(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    result = await _create(fake, provider)
    assert result == CreateResult(
        Outcome.CREATED,
        provider_id=result.provider_id,
        detail=result.detail,
        http_status=200,
    )
    (row,) = fake.instances()
    assert str(row["id"]) == result.provider_id
    assert row["label"] == "mvp-r7f3a-n1"
    assert ["MVP_RUN_ID", "r7f3a"] in row["extra_env"]


async def test_sold_offer_is_unavailable(fake: FakeVast, provider: VastAiProvider) -> None:
    offer = await _offer(fake, provider)
    fake.remove_offer(int(offer.offer_id))
    result = await provider.create(offer, REQUEST)
    assert (result.outcome, result.http_status) == (Outcome.UNAVAILABLE, 404)
    assert "no_such_ask" in result.detail
    assert fake.instances() == []


async def test_offer_rented_twice_is_unavailable_the_second_time(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    first = await provider.create(offer, REQUEST)
    second = await provider.create(offer, REQUEST)
    assert first.outcome is Outcome.CREATED
    assert second.outcome is Outcome.UNAVAILABLE
    assert len(fake.instances()) == 1


@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        (Fault(status=404), Outcome.UNAVAILABLE),
        (Fault(status=410), Outcome.UNAVAILABLE),
        (
            Fault(status=400, body={"success": False, "error": "no_such_ask", "msg": "gone"}),
            Outcome.UNAVAILABLE,
        ),
        (
            Fault(
                status=400,
                body={"success": False, "error": "x", "msg": "Offer 5 is no longer rentable"},
            ),
            Outcome.UNAVAILABLE,
        ),
        (Fault(status=403), Outcome.FORBIDDEN),
        (Fault(status=400), Outcome.REJECTED),
        (
            Fault(status=400, body={"success": False, "error": "invalid_price", "msg": "bad"}),
            Outcome.REJECTED,
        ),
        (Fault(status=422, body="Unprocessable"), Outcome.REJECTED),
        (
            Fault(
                status=400,
                body={"success": False, "error": "insufficient_credit", "msg": "low"},
            ),
            Outcome.NO_CREDITS,
        ),
        (
            Fault(status=403, body={"success": False, "msg": "Your balance is too low"}),
            Outcome.NO_CREDITS,
        ),
        (Fault(status=402, body="Payment Required"), Outcome.NO_CREDITS),
        (Fault(status=401), Outcome.AUTH_FAILED),
        (Fault(status=404, body={"msg": "Invalid user key"}), Outcome.AUTH_FAILED),
        (
            Fault(status=403, body={"success": False, "error": "auth_error", "msg": "nope"}),
            Outcome.AUTH_FAILED,
        ),
        (
            Fault(status=404, body={"msg": "Session expired. Please log in again."}),
            Outcome.AUTH_FAILED,
        ),
        (Fault(status=500), Outcome.AMBIGUOUS),
        (Fault(status=503, body="Service Temporarily Unavailable"), Outcome.AMBIGUOUS),
        (Fault(status=200, body="<html>oops</html>"), Outcome.AMBIGUOUS),
        (Fault(status=200, body={"success": True}), Outcome.AMBIGUOUS),
        (Fault(status=200, body={"success": False, "error": "weird"}), Outcome.AMBIGUOUS),
        (Fault(status=200, body=[1, 2, 3]), Outcome.AMBIGUOUS),
        (Fault(status=302, body=""), Outcome.AMBIGUOUS),
    ],
    ids=lambda v: repr(v) if isinstance(v, Outcome) else f"{v.status}-{str(v.body)[:24]}",
)
async def test_every_answer_class(
    fake: FakeVast, provider: VastAiProvider, fault: Fault, outcome: Outcome
) -> None:
    result = await _create(fake, provider, fault)
    assert result.outcome is outcome, result
    assert result.http_status == fault.status
    if outcome is not Outcome.CREATED:
        assert result.provider_id is None


async def test_wrong_key_is_auth_failed_not_a_sold_offer(fake: FakeVast) -> None:
    """Vast answers some bad keys with 404: that must never read as "offer gone"."""
    fake.auth_error_status = 404
    offer_id = fake.add_offer()
    offer = Offer("vastai", str(offer_id), "RTX 4090", 1, 24564, 0.35, 0.99, 800, 600, "US")
    wrong = VastAiProvider(api_key="wrong-key-abcdef", api_url=fake.url)
    try:
        result = await wrong.create(offer, REQUEST)
    finally:
        await wrong.aclose()
    assert (result.outcome, result.http_status) == (Outcome.AUTH_FAILED, 404)
    assert fake.instances() == []


async def test_no_credit_answer_from_the_server_state(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    fake.credit = 0.0
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.NO_CREDITS
    assert "balance" in result.detail.lower()
    assert fake.instances() == []


async def test_success_false_with_contract_is_ambiguous_with_the_id(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """Vast made an instance but says it failed (a low bid): the walk must destroy it."""
    body = {"success": False, "error": "bid_too_low", "msg": "low bid", "new_contract": 9123}
    result = await _create(fake, provider, Fault(status=200, body=body))
    assert (result.outcome, result.provider_id) == (Outcome.AMBIGUOUS, "9123")


async def test_timeout_after_performing_is_ambiguous_and_the_instance_exists(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    fake.script("create", Fault(status=200, perform=True, delay_s=30))
    impatient = VastAiProvider(api_key=fake.api_key, api_url=fake.url, timeout_s=0.5)
    started = time.monotonic()
    try:
        result = await impatient.create(offer, REQUEST)
    finally:
        await impatient.aclose()
    assert result.outcome is Outcome.AMBIGUOUS
    assert "no answer within 0.5 s" in result.detail
    assert time.monotonic() - started < 10  # the client's timeout, not the fake's delay
    assert len(fake.instances()) == 1  # the lost answer hid a real instance


async def test_dropped_connection_is_ambiguous(fake: FakeVast, provider: VastAiProvider) -> None:
    result = await _create(fake, provider, Fault(perform=True, drop=True))
    assert result.outcome is Outcome.AMBIGUOUS
    assert result.http_status is None
    assert "RemoteProtocolError" in result.detail
    assert len(fake.instances()) == 1


async def test_rate_limit_burst_is_retried_then_created(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    fake.rate_limit("create", 3)  # the provider fixture allows 3 retries
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.CREATED
    assert sum(r.method == "PUT" for r in fake.requests) == 4
    assert len(fake.instances()) == 1


async def test_rate_limit_that_outlasts_retries_raises_and_creates_nothing(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    fake.rate_limit("create", 10)
    with pytest.raises(ProviderError) as info:
        await provider.create(offer, REQUEST)
    assert info.value.http_status == 429
    assert "nothing was created" in str(info.value)
    assert "wait a minute" in info.value.fix
    assert sum(r.method == "PUT" for r in fake.requests) == 4
    assert fake.instances() == []


async def test_unreachable_server_raises_before_anything_is_sent(fake: FakeVast) -> None:
    offer_id = fake.add_offer()
    offer = Offer("vastai", str(offer_id), "RTX 4090", 1, 24564, 0.35, 0.99, 800, 600, "US")
    url = fake.url
    fake.stop()
    closed = VastAiProvider(api_key=fake.api_key, api_url=url, timeout_s=2)
    try:
        with pytest.raises(ProviderError) as info:
            await closed.create(offer, REQUEST)
    finally:
        await closed.aclose()
    assert "nothing was created" in str(info.value)
    assert "api_url" in info.value.fix


async def test_env_name_that_would_be_a_docker_option_is_refused(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    offer = await _offer(fake, provider)
    request = CreateRequest(label="x", image="img", env={"-v /:/host": "1"}, disk_gb=20)
    with pytest.raises(ProviderError) as info:
        await provider.create(offer, request)
    assert "'-v /:/host'" in str(info.value)
    assert not any(r.method == "PUT" for r in fake.requests)
