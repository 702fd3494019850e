"""Every Vast call a step cannot do without reads its failure one way (providers/base.py
`ApiErrors`, through `VastAiProvider._usable`): no answer, a server error, a refusal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from mvp_tui.providers.base import ProviderError, SelectionPolicy
from mvp_tui.providers.vastai.client import NETWORK_FIX, VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHm0Yq0bVKfbVHhDbWZ6c0ZxQ3ZyTmlQbUJxWWtuR3Y5 t@x"

Call = Callable[[VastAiProvider], Awaitable[object]]
CALLS: dict[str, tuple[str, str, Call]] = {
    # fake operation, the action the message names, the call
    "search": ("search", "searching offers", lambda p: p.search_offers(SelectionPolicy())),
    "get": ("show", "reading instance 7", lambda p: p.get("7")),
    "list": ("list", "listing instances", lambda p: p.list_by_label("mvp-")),
    "ssh_list": ("ssh_list", "listing account SSH keys", lambda p: p.ensure_ssh_key(KEY)),
    "account": ("user", "checking the API key", lambda p: p.account()),
}


# A status, what the message starts with (after "Vast.ai "), and the fix it gives.
ANSWERS = {
    "server error": (502, "failed while", "a server-side error: retry in a minute"),
    "refusal": (400, "rejected", "check the values sent and [vastai] api_url"),
}


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("name", CALLS)
async def test_a_bad_status_reads_the_shared_way(
    name: str, answer: str, fake: FakeVast, provider: VastAiProvider
) -> None:
    op, action, call = CALLS[name]
    status, says, fix = ANSWERS[answer]
    fake.script(op, Fault(status=status, body={"error": "invalid_args", "msg": "no"}))
    with pytest.raises(ProviderError) as info:
        await call(provider)
    assert str(info.value).startswith(f"Vast.ai {says} {action} (")
    assert info.value.fix.startswith(fix)
    assert info.value.http_status == status


@pytest.mark.parametrize("name", CALLS)
async def test_no_answer_reads_the_shared_way(name: str, fake: FakeVast) -> None:
    _, action, call = CALLS[name]
    url = fake.url
    fake.stop()
    closed = VastAiProvider(api_key=fake.api_key, api_url=url, timeout_s=2)
    try:
        with pytest.raises(ProviderError) as info:
            await call(closed)
    finally:
        await closed.aclose()
    assert action in str(info.value)
    assert info.value.fix == NETWORK_FIX
