"""Re-attach resumes the agent's logs at the byte positions the earlier run recorded, instead
of re-reading them from the start: a rented node (real sshd, fake Vast API) is left serving
by `up --until ready`, then a new engine adopts its lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.run import RunEngine
from mvp_tui.events import EngineEvent
from mvp_tui.lease.records import RecordStore
from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, vast_node_env
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"


def agent_records(engine: RunEngine) -> list[dict[str, object]]:
    channels = [c for c in engine.hub.channels() if c.endswith(".agent")]
    return [json.loads(f.payload) for c in channels for f in engine.hub.tail(c).frames]


async def test_reattach_resumes_the_agent_logs_where_the_earlier_run_stopped(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = vast_node_env(fake, node, KEY, tmp_path)
        async with HeadlessRun(
            ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)], state, env=env
        ) as run:
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        await run.until(event("node_ready"))
        engine_pid = run.frames("mvp.worker.weights")[0]["payload"]["engine_pid"]
        (record,) = RecordStore(state).open_runs()
        (lease,) = record.leases
        assert lease.log_positions is not None and lease.log_positions.stdout > 0
        assert lease.ready_record is not None and "WeightsLoaded" in lease.ready_record

        config = load_config(
            env={"MVP_STATE_DIR": str(state), **env},
            paths=ConfigPaths(default=tmp_path / "none.toml"),
        )
        seen: list[EngineEvent] = []
        engine = RunEngine(config, seen.append, environ={**os.environ, **env})
        try:
            (earlier,) = await engine.leasing.earlier_leases()
            engine.leasing.adopt(earlier)  # as the dashboard's re-attach choice does
            await engine.leasing.prepare_ssh_identity()
            ready = await engine.link.bring_up(timeout_s=60)
            assert ready.local_url.startswith("http://127.0.0.1:")
            # A prompt after the re-attach: the engine logs its request, and lines come in
            # order, so once that line is here every line from the resume point is too.
            answered = asyncio.Event()
            engine.hub.listeners.append(
                lambda f: answered.set() if b"POST /v1/chat/completions" in f.payload else None
            )
            queue = await engine.serving.start_prompts(rpc=False)
            queue.submit("hello again", 4)
            await asyncio.wait_for(answered.wait(), 60)
            (log,) = [c for c in engine.hub.channels() if c.endswith(".engine")]
            engine_log = b"\n".join(f.payload for f in engine.hub.tail(log).frames)
            phases = [r.get("phase") for r in agent_records(engine) if r.get("status")]
            # The agent's start and the engine's model load came before the recorded
            # positions: read from 0, they would be here again.
            assert b"llama_model_loader" not in engine_log
            assert "config" not in phases and "engine_start" not in phases, phases
            assert [e for e in seen if type(e).__name__ == "NodeReady"]
        finally:
            await engine.link.close_session(shutdown_agent=True)
            await engine.teardown.destroy_leases()
            await engine.aclose()
        assert fake.billing() == []
    if alive(engine_pid):  # the "node" is this machine: what a destroy would end
        os.kill(engine_pid, signal.SIGTERM)
