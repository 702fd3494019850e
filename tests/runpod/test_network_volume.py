"""A RunPod network volume as the model cache (issue 20 item 6), against the fake RunPod
(held to the OpenAPI document): created when missing, reused by the next run, mounted on
every pod in its data center with the agent's cache on it; `down` never deletes it, only
`mvp-tui volume delete`, confirmed; `ls` shows what it costs by the month."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.settings import ModelSettings, RuntimeSettings, node_env, volume_settings
from mvp_tui.lease.volumes import VolumeRecord, load_volumes, record_volume
from mvp_tui.providers.base import CreateRequest
from mvp_tui.providers.runpod.volumes import VOLUME_CACHE_DIR, VolumeSettings
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.conftest import make_provider
from tests.runpod.test_provider import POLICY

VOLUME = VolumeSettings(name="mvp-models", size_gb=40, data_center="EU-RO-1")


def _request() -> CreateRequest:
    return CreateRequest(label="mvp-r-1-1-1", image="img:1", env={"A": "b"}, disk_gb=20)


def _pod_bodies(fake: FakeRunPod) -> list[dict[str, object]]:
    return [r.body for r in fake.create_requests()]


async def test_a_missing_volume_is_created_and_the_next_run_reuses_it(fake: FakeRunPod) -> None:
    first = make_provider(fake, volume=VOLUME)
    try:
        offers = await first.search_offers(POLICY)
        assert (await first.create(offers[0], _request())).provider_id
    finally:
        await first.aclose()
    (volume,) = fake.volumes()
    assert (volume["name"], volume["size"], volume["dataCenter"]) == ("mvp-models", 40, "EU-RO-1")
    mount = {"network": [{"volumeId": volume["id"], "path": "/runpod-volume"}]}
    second = make_provider(fake, volume=VolumeSettings(name="mvp-models"))  # no DC: reuse only
    try:
        offers = await second.search_offers(POLICY)
        assert (await second.create(offers[0], _request())).provider_id
        assert (await second.create(offers[0], _request())).provider_id
    finally:
        await second.aclose()
    assert len(fake.volumes()) == 1  # reused, never a second one
    creates = [r for r in fake.requests if r.method == "POST" and r.path == "/v2/network-volumes"]
    assert len(creates) == 1
    for body in _pod_bodies(fake):
        assert body["mounts"] == mount and body["dataCenterIds"] == ["EU-RO-1"]


def test_the_agents_cache_lives_on_the_volume(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[provider]\nkind = "runpod"\n\n[runpod]\napi_key = "rpa_123456789"\n'
                    'network_volume = "mvp-models"\n')
    config = load_config(env={}, paths=ConfigPaths(explicit=path, explicit_source="flag"))
    assert volume_settings(config) == VolumeSettings(name="mvp-models", size_gb=50)
    runtime, model = RuntimeSettings.from_config(config), ModelSettings.from_config(config)
    env = node_env(runtime, model, provider="runpod", run_id="r-1",
                   environ={"MVP_MODEL_CACHE_DIR": "/x"})
    assert env["MVP_MODEL_CACHE_DIR"] == VOLUME_CACHE_DIR  # on the volume, over any other


async def test_down_keeps_the_volume_and_only_volume_delete_ends_it(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake, volume=VOLUME)
    try:
        volume = await provider.prepare_volume()
    finally:
        await provider.aclose()
    assert volume is not None
    state = tmp_path / "state"
    record_volume(state, VolumeRecord("runpod", volume.id, volume.name, volume.size_gb,
                                      volume.data_center, 0.07, "r-1"))
    env = {"MVP_STATE_DIR": str(state), "MVP_NODE_PROVIDER": "runpod",
           "RUNPOD_API_KEY": fake.api_key, "MVP_RUNPOD_API_URL": fake.api_url}
    assert cli("down", "--all", "--yes", env=env).returncode == 0
    assert [v["id"] for v in fake.volumes()] == [volume.id]  # `down` ends leases only
    listed = cli("ls", env=env)
    assert f"volume {volume.id}" in listed.stdout and "$2.80/month" in listed.stdout
    assert f"mvp-tui volume delete {volume.id}" in listed.stdout
    refused = cli("volume", "delete", volume.id, env=env)  # no --yes, no terminal: not asked
    assert refused.returncode != 0 and fake.volumes() != []
    deleted = cli("volume", "delete", "mvp-models", "--yes", env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert "confirmed by RunPod" in deleted.stderr
    assert fake.volumes() == [] and load_volumes(state) == []
