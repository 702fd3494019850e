"""A `stop` on stdin while the run waits for its node: the seed ends it as an error, "shutdown
requested while waiting for node ready" / "… for weights loaded", exit 1. Here the user's own
stop is not a failure: the teardown is confirmed and the exit is 0, and the reason keeps the
seed's words (docs/seed-compatibility.md lists the difference). A real headless
run whose engine never becomes healthy, so the stop lands while waiting for the weights.
Contract: 002_…txt `wait_for_runtime_ready`, `wait_for_weights_loaded`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import RunStarted
from mvp_tui.engine.orch import OrchTap
from mvp_tui.lease.events import AttemptStarted, LeaseRunning
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.events import AgentStarted
from tests.agent.procs import alive
from tests.seed.proc import clean_env, start_cli

SEED_PAGE = Path(__file__).resolve().parents[2] / "docs" / "seed-compatibility.md"


async def test_a_stop_while_waiting_for_the_weights_exits_0_in_the_seeds_words(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    args = ["up", "--headless", "--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    # An engine that starts and never answers: the node's weights never load.
    env = clean_env(tmp_path / "state", MVP_NODE_PROVIDER="local", MVP_ENGINE_CMD="sleep 600")
    proc = await start_cli(args, env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        seen = []
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "the run ended before its node's runtime was up"
            seen.append(json.loads(line))
            payload = seen[-1].get("payload")
            if isinstance(payload, dict) and (payload.get("phase"), payload.get("status")) == (
                "node_runtime_ready",
                "ready",
            ):
                break
        proc.stdin.write(b"stop\n")
        await proc.stdin.drain()
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    text = err.decode()
    assert (
        "shutdown requested while waiting for weights loaded; stopped by a stop line on stdin; "
        "torn down, confirmed" in text
    ), text
    events = seen + [json.loads(line) for line in out.splitlines()]
    names = [e["event"] for e in events]
    assert "node_ready" not in names and "lease_deleted" in names
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert finished["exit_code"] == 0 and finished["leases_left"] == []
    pids = [int(e["provider_id"].removeprefix("local-")) for e in events
            if e["event"] == "attempt_answered" and e.get("provider_id")]
    assert pids and not any(alive(pid) for pid in pids)


def test_what_the_run_waits_for_follows_the_seeds_two_waits() -> None:
    orch = OrchTap(lambda _e: None, ChannelHub(), run_id="41", node_id=1, redactor=Redactor())
    orch.describe(provider="vastai", image="i", ssh_node=True, config={}, env_keys=(),
                  default_max_tokens=64)
    orch(RunStarted(run_id="41", provider="vastai", profile="deploy", state_dir="/x"))
    assert orch.waiting_for is None  # choosing offers: nothing is awaited yet
    orch(AttemptStarted(run_id="41", label="mvp-41-1-1", offer_id="7", gpu_name="RTX 4090",
                        price_per_hour=0.3, attempt=1))
    assert orch.waiting_for == "node ready"
    orch(LeaseRunning(run_id="41", provider_id="7", label="mvp-41-1-1", host="h", port=22,
                      user="root", via="direct", after_s=1.0, price_per_hour=0.3))
    assert orch.waiting_for == "node ready"  # rented: ready once the agent runs over SSH
    orch(AgentStarted(lease_key="vastai:7", pid=42, remote_dir="/root/mvp"))
    assert orch.waiting_for == "weights loaded"


def test_the_docs_list_the_exit_0_as_a_seed_difference() -> None:
    text = " ".join(SEED_PAGE.read_text(encoding="utf-8").split())
    assert "**A stop on stdin while waiting**" in text and "002" in text
    assert "shutdown requested while waiting for node ready" in text
    assert "the exit is 0" in text
