"""Optional provider abilities are declared on the protocol, each with its default on
`ProviderBase` (no caller probes a provider for them); the defaults mean "this provider
cannot", and every provider in the tree takes them from the base."""

from __future__ import annotations

import asyncio

import pytest

from mvp_tui.providers.base import Provider, ProviderBase
from mvp_tui.providers.docker.client import DockerProvider
from mvp_tui.providers.local.client import LocalProvider
from mvp_tui.providers.runpod.client import RunPodProvider
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.rehearsal.provider import RehearsalProvider

ABILITIES = (
    "last_skipped",
    "last_reorder_error",
    "reorder_offers",
    "host_key_for",
    "ensure_ssh_key",
    "prepare_volume",
    "wait_exited",
)


def test_each_ability_is_on_the_protocol_with_a_default() -> None:
    for name in ABILITIES:
        assert hasattr(Provider, name), name
        assert name in vars(ProviderBase), name


@pytest.mark.parametrize(
    "kind", [DockerProvider, LocalProvider, RunPodProvider, VastAiProvider, RehearsalProvider]
)
def test_every_provider_takes_the_defaults_from_the_base(kind: type) -> None:
    assert issubclass(kind, ProviderBase)


async def test_the_defaults_say_this_provider_cannot() -> None:
    base = ProviderBase()
    assert base.last_skipped == () and base.last_reorder_error is None
    assert await base.reorder_offers([], []) is None  # the walk keeps the order it had
    assert base.host_key_for("mvp-r-1-0-1") is None  # the first connect pins what answers
    assert await base.ensure_ssh_key("ssh-ed25519 AAAA") is None  # no account keys
    assert await base.prepare_volume() is None
    waiting = asyncio.ensure_future(base.wait_exited("1"))  # it cannot tell: never returns
    done, _ = await asyncio.wait({waiting}, timeout=0.05)
    assert not done
    waiting.cancel()
