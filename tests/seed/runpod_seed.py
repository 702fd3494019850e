"""What the seed 003 (RunPod) contract tests share: a fake RunPod with a catalog of many GPU
types (every exchange checked against RunPod's OpenAPI document when the test ends), a
provider pointed at it, and a walk with millisecond waits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.runpod.client import RunPodProvider
from tests.fakes.runpod_server import FakeRunPod
from tests.lease.conftest import fast_settings
from tests.runpod.conftest import assert_contract, make_provider

POLICY = SelectionPolicy(require_verified=False)
# Seven types, all in stock, cheapest first: more than `[lease] max_attempts` (5).
SEVEN = tuple(f"NVIDIA SEED GPU {n}" for n in range(1, 8))


def seeded_fake() -> Iterator[FakeRunPod]:
    """The body of each test module's `fake` fixture (`yield from seeded_fake()`)."""
    with FakeRunPod() as server:
        for n, gpu in enumerate(SEVEN, 1):
            server.add_gpu(gpu, memory=24, secure_price=0.10 * n, max_community=0)
        yield server
    assert_contract(server)


def provider_for(fake: FakeRunPod, **settings: object) -> RunPodProvider:
    return make_provider(fake, **settings)


def walk_for(
    provider: RunPodProvider, tmp_path: Path, run_id: str, **settings: object
) -> tuple[LeaseWalk, RecordStore, RecordingSink]:
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    walk = LeaseWalk(provider, store, sink, fast_settings(**settings), run_id=run_id)
    return walk, store, sink


def gpus_created(fake: FakeRunPod) -> list[str]:
    return [r.body["gpu"]["id"] for r in fake.create_requests()]
