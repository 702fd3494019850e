"""The engine's side of the boot guard: `[limits] boot_grace_mins` reaches the create env as
whole seconds with the run's API URL; the agent's `boot_guard` verdict becomes a
`NodeBootGuard` event; a failed one stops the run when `require_node_watchdog` holds, and
does not when the user opted out; a later "armed" (another node) never hides it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.events import NodeBootGuard
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.engine.settings import create_env
from mvp_tui.events import EngineEvent
from mvp_tui.node_protocol import BOOT_GUARD_PHASE, NODE_AGENT_PHASE, agent_channel

VAST = '[provider]\nkind = "vastai"\n\n[vastai]\napi_key = "key-123456"\napi_url = "http://127.0.0.1:9"\n'


def engine(tmp_path: Path, env: dict[str, str], events: list[EngineEvent]) -> RunEngine:
    path = tmp_path / "config.toml"
    path.write_text(VAST)
    config = load_config(
        env={"MVP_STATE_DIR": str(tmp_path / "state"), **env},
        paths=ConfigPaths(explicit=path, explicit_source="flag --config"),
    )
    return RunEngine(config, events.append, environ={"MVP_BOOT_GUARD_DIR": "/tmp/g"})


def verdict(run: RunEngine, node: int, status: str, **detail: object) -> None:
    record = {"type": NODE_AGENT_PHASE, "phase": BOOT_GUARD_PHASE, "status": status,
              "detail": detail, "run_id": run.ctx.run_id, "node_id": node, "at": 1.0}
    run.hub.publish(agent_channel(node), json.dumps(record).encode())


@pytest.mark.parametrize(
    ("mins", "secs"), [("20", "1200"), ("0.05", "3"), ("0.001", "1"), ("0", "0")]
)
def test_the_grace_reaches_the_create_env_in_whole_seconds(
    tmp_path: Path, mins: str, secs: str
) -> None:
    run = engine(tmp_path, {"MVP_BOOT_GRACE_MINS": mins}, [])
    env = create_env(run.ctx.walk_settings().env)
    assert env["MVP_BOOT_GRACE_S"] == secs
    assert env["MVP_VASTAI_API_URL"] == "http://127.0.0.1:9"  # the run's own API base URL
    assert env["MVP_BOOT_GUARD_DIR"] == "/tmp/g"  # the agent and the guard agree on it
    assert "key-123456" not in json.dumps(env)


def test_a_guard_that_cannot_run_stops_a_required_run(tmp_path: Path) -> None:
    events: list[EngineEvent] = []
    run = engine(tmp_path, {}, events)
    verdict(run, 1, "failed", state="failed", reason="the boot guard cannot run: no curl")
    verdict(run, 2, "ready", state="armed", armed=True, tool="curl", grace_s=60)
    (first, second) = [e for e in events if isinstance(e, NodeBootGuard)]
    assert (first.status, first.reason) == ("failed", "the boot guard cannot run: no curl")
    assert (second.status, second.grace_s, second.tool) == ("armed", 60, "curl")
    with pytest.raises(RunFailed, match="the node's boot guard cannot protect this lease"):
        run.link.check_watchdog()


def test_opting_out_does_not_refuse_a_node_whose_guard_failed(tmp_path: Path) -> None:
    """The same failed verdict the required run refuses (above) reaches the engine, and the
    check that would refuse it lets the node run."""
    events: list[EngineEvent] = []
    run = engine(tmp_path, {"MVP_REQUIRE_NODE_WATCHDOG": "false"}, events)
    verdict(run, 1, "failed", state="failed", reason="the boot guard cannot run: no curl")
    (seen,) = [e for e in events if isinstance(e, NodeBootGuard)]
    assert (seen.status, seen.reason) == ("failed", "the boot guard cannot run: no curl")
    held = run.verdicts.boot_guard_verdict
    assert held is not None and held.status == "failed"  # there is a failure to refuse
    run.link.check_watchdog()  # not refused (a refusal raises, as above): the node runs


@pytest.mark.parametrize("state", ["armed", "none", "off"])
def test_a_guard_that_ran_or_none_is_not_refused(tmp_path: Path, state: str) -> None:
    run = engine(tmp_path, {}, [])
    verdict(run, 1, "ready", state=state)
    run.link.check_watchdog()
    held = run.verdicts.boot_guard_verdict
    assert held is not None and held.status == state
