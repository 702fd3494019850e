"""Provable zero on the fake RunPod (issue 28 §3): `down --all` lists every pod status, an
EXITED pod of ours (it bills its disk) is destroyed, confirmed; a foreign one is left alone;
our network volume is kept on purpose and shown with its monthly cost."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.lease.volumes import VolumeRecord, record_volume
from mvp_tui.providers.runpod.volumes import VolumeSettings
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.conftest import make_provider


async def test_down_all_destroys_our_exited_pod_and_shows_the_kept_volume(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake, volume=VolumeSettings("mvp-models", 40, "EU-RO-1"))
    try:
        volume = await provider.prepare_volume()
    finally:
        await provider.aclose()
    assert volume is not None
    state = tmp_path / "state"
    record_volume(state, VolumeRecord("runpod", volume.id, volume.name, volume.size_gb,
                                      volume.data_center, 0.07, "r-0000dddd"))
    ours = fake.add_pod("mvp-a1b2c3d4e5-r-0000dddd-1-1")  # this install's tag, no record
    fake.exit_pod(ours)
    foreign = fake.add_pod("mvpx-a1b2c3d4e5-r-0000dddd-1-1")
    fake.exit_pod(foreign)
    assert {p["status"] for p in fake.pods()} == {"EXITED"}
    env = {"MVP_STATE_DIR": str(state), "RUNPOD_API_KEY": fake.api_key,
           "MVP_RUNPOD_API_URL": fake.api_url, "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "MVP_LEASE_OWNER_TAG": "a1b2c3d4e5"}
    down = cli("down", "--all", "--yes", env=env)
    assert down.returncode == 0, down.stderr
    assert [p["id"] for p in fake.pods()] == [foreign]
    assert fake.deleted() == [ours]
    assert f"1 EXITED pod {ours} destroyed, confirmed" in down.stderr
    assert "mvpx" not in down.stderr and foreign not in down.stderr
    assert (f"volume mvp-models ({volume.id}) kept: $2.80/month until "
            "`mvp-tui volume delete mvp-models`") in down.stderr
    assert [v["id"] for v in fake.volumes()] == [volume.id], "volumes are kept on purpose"
