"""The orchestrator's own stderr lines reach the node's `.stderr` channel, as the seed's
stdio capture writes them (`mvp.provisioning.logs.node.<N>.stderr`, source `orchestrator`;
the seed's own test reads `…node.9.stderr`), in the dashboard as in headless: the warnings
for keys accepted but not built are there from the run's start. Contract: 002_…txt
`drain_orch_stdio_capture`, docs/seed-compatibility.md "Keys accepted, not built". (Headless:
test_seed_archive.)"""

from __future__ import annotations

import json
from pathlib import Path

from mvp_tui.engine.events import OffersListed
from tests.seed.seed_archive import read_seed_archive
from tests.tui.apps import engine_of
from tests.tui.test_dashboard_run import dashboard, is_

STDERR = "mvp.provisioning.logs.node.9.stderr"


async def test_the_dashboard_writes_the_config_warnings_on_the_stderr_channel(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "frames.jsonl"
    env = {"MVP_NODE_PROVIDER": "local", "MVP_DASHBOARD": "true", "MVP_LOGICAL_NODE_ID": "9",
           "MVP_DATASTREAM_FRAME_LOG": str(archive)}
    app, seen = dashboard(env, tmp_path)
    hub = engine_of(app).hub
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        frames = hub.tail(STDERR).frames
        provider = hub.tail("mvp.provisioning.logs.node.9.provider").frames
        hub.flush()
    lines = [json.loads(f.payload)["line"] for f in frames]
    assert len(lines) == 1 and lines[0]["stream"] == "Stderr" and lines[0]["node_id"] == 9
    assert lines[0]["line"].startswith("warning: [prompt] dashboard = true from env "), lines
    assert "accepted and has no effect here" in lines[0]["line"]
    assert not any(b"warning: " in f.payload for f in provider)
    archived = [r for r in read_seed_archive(archive) if r.channel == STDERR]
    assert [r.source for r in archived] == ["orchestrator"]
