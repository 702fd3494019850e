"""The SSH identity's errors name the running provider's own key: on RunPod `[runpod]
ssh_identity` (env MVP_RUNPOD_SSH_IDENTITY), never Vast's. Contract: 002_…txt (the identity
"must exist" error names the key it was read from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.ssh import IdentityError, load_identity
from mvp_tui.ssh.settings import SshSettings
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod


@pytest.mark.parametrize(
    ("provider", "key", "env"),
    [
        ("runpod", "[runpod] ssh_identity", "MVP_RUNPOD_SSH_IDENTITY"),
        ("vastai", "[vastai] ssh_identity", "MVP_VASTAI_SSH_IDENTITY"),
    ],
)
async def test_a_missing_identity_names_the_providers_own_key(
    provider: str, key: str, env: str, tmp_path: Path
) -> None:
    missing = tmp_path / "no_such_key"
    paths = ConfigPaths(default=tmp_path / "none.toml")  # no config file: defaults
    config = load_config(env={"MVP_NODE_PROVIDER": provider, env: str(missing)}, paths=paths)
    settings = SshSettings.from_config(config)
    with pytest.raises(IdentityError) as caught:
        await load_identity(settings.identity_path, config_key=settings.identity_key)
    text = str(caught.value) + " " + str(caught.value.fix)
    other = "vastai" if provider == "runpod" else "runpod"
    assert str(missing) in text and key in text and env in text, text
    assert f"[{other}]" not in text and f"MVP_{other.upper()}" not in text, text


def test_a_runpod_run_without_its_key_names_runpods_key(tmp_path: Path) -> None:
    """The whole path: `up` on RunPod with no key at ~/.ssh/id_ed25519 stops before any
    create, and its error names the RunPod key."""
    home = tmp_path / "home"
    home.mkdir()
    with FakeRunPod() as fake:
        fake.add_gpu("NVIDIA RTX A5000", memory=24, secure_price=0.27)
        env = {
            "HOME": str(home), "MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": fake.api_key,
            "MVP_RUNPOD_API_URL": fake.api_url, "MVP_STATE_DIR": str(tmp_path / "state"),
        }
        done = cli("up", "--headless", "--yes", "--until", "leased", env=env)
        creates = [e for e in fake.exchanges if e.op == "create"]
    assert done.returncode != 0, done.stderr
    assert "[runpod] ssh_identity" in done.stderr, done.stderr
    assert "MVP_RUNPOD_SSH_IDENTITY" in done.stderr, done.stderr
    assert "vastai" not in done.stderr.lower(), done.stderr
    assert creates == []
