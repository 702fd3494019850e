"""The API key never leaves in a URL, an error, a result, a repr or a traceback."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mvp_tui.providers.base import (
    CreateRequest,
    Offer,
    ProviderError,
    SelectionPolicy,
)
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault

KEY = "vast-SECRET-key-4f9c2e7b1a0d5e6f"
OFFER = Offer("vastai", "1001", "RTX 4090", 1, 24564, 0.35, 0.99, 800.0, 600.0, "US")
REQUEST = CreateRequest("mvp-r1-n1", "img:1", {}, 20)


def _texts(value: Any) -> list[str]:
    """Every text a caller could print from a result or an exception."""
    if isinstance(value, BaseException):
        texts = [str(value), repr(value), *map(str, value.args)]
        texts += traceback.format_exception(value)
        if isinstance(value, ProviderError):
            texts.append(value.fix)
        return texts
    return [repr(value), str(value)]


async def _every_path(provider: VastAiProvider) -> list[Any]:
    """Run every provider call once, keeping its result or its exception."""
    outcomes: list[Any] = []
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: provider.search_offers(SelectionPolicy()),
        lambda: provider.create(OFFER, REQUEST),
        lambda: provider.get("7001"),
        lambda: provider.list_by_label("mvp-"),
        lambda: provider.destroy("7001"),
        lambda: provider.ensure_ssh_key(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0rLgMvRZ9wKj3eQ2pW1zGz9cHqk1n4Xb7m2aFv0s8T x"
        ),
        lambda: provider.account(),
    ]
    for call in calls:
        try:
            outcomes.append(await call())
        except ProviderError as exc:
            outcomes.append(exc)
    outcomes.append(provider)
    outcomes.append(list(provider.last_skipped))
    return outcomes


OPS = ["search", "create", "show", "list", "destroy", "ssh_list", "ssh_create", "user"]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=401),
        Fault(status=404, body={"msg": "Invalid user key"}),
        Fault(status=500, body={"success": False, "msg": f"trace: Bearer {KEY}"}),
        Fault(status=400, body={"error": "invalid_args", "msg": f"bad key {KEY}"}),
        Fault(status=200, body=f"<html>{KEY}</html>"),
        Fault(status=429),
        Fault(drop=True),
    ],
    ids=["401", "404-auth", "500-echo", "400-echo", "200-garbage", "429", "drop"],
)
async def test_key_absent_from_every_error_path(fault: Fault) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(id=1001)
        for op in OPS:
            fake.script(op, *([fault] * 5))  # 429 is retried: keep answering it
        provider = VastAiProvider(
            api_key=KEY,
            api_url=fake.url,
            timeout_s=2,
            rate_limit_retries=2,
            rate_limit_base_delay_s=0.0,
        )
        try:
            outcomes = await _every_path(provider)
        finally:
            await provider.aclose()
        assert any(isinstance(o, ProviderError) for o in outcomes)
        for outcome in outcomes:
            for text in _texts(outcome):
                assert KEY not in text, text
        _assert_key_only_in_the_header(fake)


async def test_key_absent_from_success_paths_and_echoed_rows() -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.loading_polls = 0
        fake.add_offer(id=1001, geolocation=f"leak {KEY}")
        lease = fake.add_instance(label=f"mvp-{KEY}", status_msg=f"token {KEY}")
        provider = VastAiProvider(api_key=KEY, api_url=fake.url)
        try:
            offers = await provider.search_offers(SelectionPolicy())
            status = await provider.get(str(lease))
            listed = await provider.list_by_label("mvp-")
        finally:
            await provider.aclose()
        for value in (offers, status, listed, provider):
            for text in _texts(value):
                assert KEY not in text, text
        assert offers[0].location == "leak <redacted>"
        assert KEY not in status.detail and KEY not in (status.label or "")
        assert all(KEY not in (s.label or "") + s.detail for s in listed)
        _assert_key_only_in_the_header(fake)


def _assert_key_only_in_the_header(fake: FakeVast) -> None:
    assert fake.requests
    for request in fake.requests:
        assert KEY not in request.path
        assert all(KEY not in k and KEY not in v for k, v in request.query.items())
        assert KEY not in repr(request.body)
        assert request.headers["authorization"] == f"Bearer {KEY}"


def test_repr_hides_the_key() -> None:
    provider = VastAiProvider(api_key=KEY, api_url="http://127.0.0.1:9")
    assert KEY not in repr(provider)
    assert KEY not in str(vars(provider).get("_client"))


@pytest.mark.parametrize("bad", ["", "   ", "key with space", "key\nnewline"])
def test_bad_key_is_refused_without_echoing_it(bad: str) -> None:
    with pytest.raises(ProviderError) as info:
        VastAiProvider(api_key=bad)
    assert "api_key" in info.value.fix
    if bad.strip():
        assert bad not in str(info.value)


def test_bad_api_url_is_named() -> None:
    with pytest.raises(ProviderError) as info:
        VastAiProvider(api_key=KEY, api_url="console.vast.ai/api")
    assert "'console.vast.ai/api'" in str(info.value)
    assert "https://console.vast.ai" in info.value.fix
