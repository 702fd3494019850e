"""ensure_ssh_key: registers a public key once, recognises it in either list shape."""

from __future__ import annotations

import pytest

from mvp_tui.providers.base import ProviderError
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault


async def test_registers_once_then_is_idempotent(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    assert await provider.ensure_ssh_key(public_key) is True
    assert await provider.ensure_ssh_key(public_key) is False
    assert fake.account_keys == [public_key]
    posts = [r for r in fake.requests if r.method == "POST" and r.path == "/api/v0/ssh/"]
    assert [p.body for p in posts] == [{"ssh_key": public_key}]


async def test_same_key_with_another_comment_is_recognised(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    key_type, blob, _comment = public_key.split(" ", 2)
    fake.account_keys.append(f"{key_type}   {blob} someone@laptop\n")
    assert await provider.ensure_ssh_key(public_key) is False
    assert len(fake.account_keys) == 1


async def test_wrapped_list_shape_is_understood(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    fake.ssh_list_shape = "wrapped"
    fake.account_keys.append(public_key)
    assert await provider.ensure_ssh_key(public_key) is False


async def test_other_keys_on_the_account_do_not_count(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    fake.account_keys.append(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0rLgMvRZ9wKj3eQ2pW1zGz9cHqk1n4Xb7m2aFv0s8T other"
    )
    assert await provider.ensure_ssh_key(public_key) is True
    assert len(fake.account_keys) == 2


async def test_private_key_is_refused_before_any_request(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    label = "OPENSSH PRIVATE KEY"  # a truncated key body: the refusal must not need more
    private = f"-----BEGIN {label}-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END"
    with pytest.raises(ProviderError) as info:
        await provider.ensure_ssh_key(private)
    assert "private key" in str(info.value)
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in str(info.value)
    assert fake.requests == []


@pytest.mark.parametrize("text", ["", "not a key", "ssh-ed25519 !!!notbase64!!!", "ssh-foo AAAA"])
async def test_malformed_public_key_is_refused(
    fake: FakeVast, provider: VastAiProvider, text: str
) -> None:
    with pytest.raises(ProviderError) as info:
        await provider.ensure_ssh_key(text)
    assert "OpenSSH format" in str(info.value)
    assert fake.requests == []


async def test_team_key_answer_explains_the_fix(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    fake.script(
        "ssh_create",
        Fault(
            status=400,
            body={
                "success": False,
                "error": "team_ssh_keys_not_supported",
                "msg": "Team SSH keys are not supported.",
            },
        ),
    )
    with pytest.raises(ProviderError) as info:
        await provider.ensure_ssh_key(public_key)
    assert "personal API key" in info.value.fix


async def test_list_failure_raises(
    fake: FakeVast, provider: VastAiProvider, public_key: str
) -> None:
    fake.script("ssh_list", Fault(status=500))
    with pytest.raises(ProviderError) as info:
        await provider.ensure_ssh_key(public_key)
    assert info.value.http_status == 500
    assert fake.account_keys == []


async def test_account_reports_credit(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.credit = 12.5
    account = await provider.account()
    assert (account.user_id, account.credit) == (str(fake.user_id), 12.5)
