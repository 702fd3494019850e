"""Fixtures for the Vast.ai provider tests: a live FakeVast and a provider pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import asyncssh
import pytest

from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast

# Short enough to keep the suite fast, long enough for a loaded 2-core CI machine.
TIMEOUT_S = 2.0


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with FakeVast() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeVast) -> AsyncIterator[VastAiProvider]:
    client = VastAiProvider(
        api_key=fake.api_key,
        api_url=fake.url,
        timeout_s=TIMEOUT_S,
        rate_limit_retries=3,
        rate_limit_base_delay_s=0.01,
    )
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def public_key() -> str:
    """A real OpenSSH ed25519 public key line."""
    key = asyncssh.generate_private_key("ssh-ed25519", comment="mvp@test")
    return key.export_public_key("openssh").decode().strip()
