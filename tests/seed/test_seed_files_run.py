"""Each TOML file of the seed's documents gets a run here, not only a load: the vastai-image
file rents on the fake Vast API (over real HTTP) with the image the seed would pick, no
warning and no error; the layering file's run is tests/seed/test_seed_archive.py. Contract:
002_…txt `toml_vastai_image_overrides_image_node_for_vastai_provider`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_vast_headless import cli
from tests.e2e.test_vast_headless import closed_port as closed_port
from tests.e2e.test_vast_headless import fake as fake
from tests.e2e.test_vast_headless import vast_env as vast_env
from tests.fakes.vastai_server import FakeVast
from tests.seed.seed_files import VASTAI_IMAGE_TOML


def test_the_seeds_vastai_image_file_rents_with_the_seeds_image(
    vast_env: dict[str, str], fake: FakeVast, tmp_path: Path
) -> None:
    config = tmp_path / "vastai-image.toml"
    config.write_text(VASTAI_IMAGE_TOML)
    config.chmod(0o600)  # it holds an API key: kept private, as the app warns
    env = {k: v for k, v in vast_env.items() if k != "MVP_NODE_PROVIDER"}  # the file's kind
    up = cli("--config", str(config), "up", "--headless", "--yes", "--until", "leased", env=env)
    assert up.returncode == 0, up.stderr
    # No warning: every key of this file is built here (the account key's line is the seed's).
    said = [x for x in up.stderr.splitlines() if not x.endswith("registered for account")]
    assert said == []
    (instance,) = fake.instances()
    assert instance["image_uuid"] == "docker.io/example/vastai:toml"
    records = [json.loads(line) for line in up.stdout.splitlines()]
    starts = [
        r["payload"]["event"]
        for r in records
        if r.get("channel") == "mvp.provisioning.events"
        and r["payload"]["event"]["kind"] == "ProvisionStart"
    ]
    assert starts[0] == {
        **starts[0],
        "provider": "vastai",
        "message": "starting vastai image docker.io/example/vastai:toml",
    }
    down = cli("--config", str(config), "down", "--all", "--yes", env=env)
    assert down.returncode == 0, down.stderr
    assert fake.billing() == []
