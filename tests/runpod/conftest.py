"""Fixtures for the RunPod tests: a live FakeRunPod whose every exchange is checked against
RunPod's OpenAPI document when the test ends, and a provider pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import asyncssh
import pytest

from mvp_tui.providers.runpod.client import RunPodProvider, RunPodSettings
from tests.e2e.conftest import tiny_gguf  # noqa: F401  (the e2e run's model)
from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.contract import check_all

TIMEOUT_S = 2.0


class Sleeps:
    """The provider's sleep: records each wait, never sleeps (Retry-After is asserted)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def assert_contract(fake: FakeRunPod) -> None:
    problems = check_all(fake.exchanges)
    assert not problems, "\n".join(str(p) for p in problems)
    assert fake.cloudflare_blocks == 0, "a request went out with a generic User-Agent"


@pytest.fixture
def fake() -> Iterator[FakeRunPod]:
    with FakeRunPod() as server:
        server.add_gpu("NVIDIA RTX A5000", memory=24, secure_price=0.27, community_price=0.16)
        server.add_gpu("NVIDIA GeForce RTX 4090", memory=24, secure_price=0.69,
                       community_price=0.34)
        server.add_gpu("NVIDIA A40", memory=48, secure_price=0.40, stock="LOW")
        yield server
    assert_contract(server)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_provider(
    fake: FakeRunPod, sleeps: Sleeps | None = None, **settings: object
) -> RunPodProvider:
    base = {"probe_ssh_banner": False, "min_vram_gb": 16}
    return RunPodProvider(
        api_key=fake.api_key,
        api_url=fake.api_url,
        settings=RunPodSettings(**{**base, **settings}),  # type: ignore[arg-type]
        timeout_s=TIMEOUT_S,
        create_timeout_s=TIMEOUT_S,
        sleep=sleeps or Sleeps(),
    )


@pytest.fixture
async def provider(fake: FakeRunPod, sleeps: Sleeps) -> AsyncIterator[RunPodProvider]:
    client = make_provider(fake, sleeps)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def public_key() -> str:
    key = asyncssh.generate_private_key("ssh-ed25519", comment="mvp@test")
    return key.export_public_key("openssh").decode().strip()
