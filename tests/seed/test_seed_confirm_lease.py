"""`[vastai] confirm_lease` does what it says: headless without --yes rents only when it is
false (the dashboard's confirm follows it too: `Config.confirm_lease`, tests/seed/
test_seed_config.py). Against the fake Vast API over real HTTP. Contract: 002_…txt."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_vast_headless import cli
from tests.e2e.test_vast_headless import closed_port as closed_port
from tests.e2e.test_vast_headless import fake as fake
from tests.e2e.test_vast_headless import vast_env as vast_env
from tests.fakes.vastai_server import FakeVast


def test_headless_without_yes_is_refused_while_confirm_lease_holds(
    vast_env: dict[str, str],
    fake: FakeVast,
) -> None:
    result = cli("up", "--headless", "--until", "leased", env=vast_env)
    assert result.returncode == 2
    assert "--yes" in result.stderr and "[vastai] confirm_lease = false" in result.stderr
    assert fake.instances() == []


def test_confirm_lease_false_rents_headless_without_yes(
    vast_env: dict[str, str],
    fake: FakeVast,
    tmp_path: Path,
) -> None:
    config = tmp_path / "seed.toml"
    config.write_text("[vastai]\nconfirm_lease = false\n")
    up = cli(
        "--config",
        str(config),
        "up",
        "--headless",
        "--until",
        "leased",
        "--down-after",
        env=vast_env,
    )
    assert up.returncode == 0, up.stderr
    events = [json.loads(line)["event"] for line in up.stdout.splitlines()]
    assert events.index("lease_running") < events.index("lease_deleted")
    assert fake.billing() == []
