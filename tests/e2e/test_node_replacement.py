"""A lost node is replaced: a serving node whose agent and engine are killed (and whose
instance the provider then shows exited) is destroyed, confirmed, and the next offer brought
up in its place. The prompt RPC keeps its address and answers a new prompt from the new
node, the local OpenAI port stays the same, and `ls` shows one live lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event, rpc_token
from tests.e2e.node import Node, vast_node_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.ssh.sshd import free_port

KEY = "fake-vast-key-0123456789"


async def rpc_prompt(
    port: int, text: str, token: str, max_tokens: int = 6
) -> list[dict[str, Any]]:
    """One prompt over the JSON-lines RPC (with the run's token); its lines up to the end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request = {"request_id": 1, "prompt_text": text, "max_tokens": max_tokens,
                   "token": token}
        writer.write(json.dumps(request).encode() + b"\n")
        lines: list[dict[str, Any]] = []
        while not lines or lines[-1]["type"] == "text_delta":
            raw = await asyncio.wait_for(reader.readline(), 60)
            assert raw.endswith(b"\n"), f"the RPC closed early after {lines}"
            lines.append(json.loads(raw))
        return lines
    finally:
        writer.close()


async def test_a_killed_serving_node_is_replaced_behind_the_same_addresses(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    rpc_port = free_port()
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.10)
        fake.add_offer(dph_total=0.20)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = {**vast_node_env(fake, node, KEY, tmp_path),
               "MVP_PROMPT_RPC_BIND": f"127.0.0.1:{rpc_port}"}
        state = tmp_path / "state"
        async with HeadlessRun(["--yes", "--gguf-local-path", str(tiny_gguf)], state, env) as run:
            first = await run.until(event("node_ready"), within=120)
            await run.until(event("prompt_rpc_listening"))
            answer = await rpc_prompt(rpc_port, "before", rpc_token(state))
            assert answer[-1]["type"] == "done", answer
            # The host dies: its agent and engine killed, then the provider shows it exited.
            (started,) = run.events("agent_started")
            engine_pid = run.frames("mvp.worker.weights")[0]["payload"]["engine_pid"]
            for pid in (started["pid"], engine_pid):
                os.kill(pid, signal.SIGKILL)
            (lost_id,) = [row["id"] for row in fake.instances()]
            fake.exit_instance(lost_id)
            second = await run.until(lambda _: len(run.events("node_ready")) >= 2, within=120)
            second = run.events("node_ready")[1]
            answer = await rpc_prompt(rpc_port, "after", rpc_token(state))
            assert answer[-1]["type"] == "done", answer
            listed = cli("ls", "--json", env={**env, "MVP_STATE_DIR": str(state)})
            assert listed.returncode == 0, listed.stderr
            rows = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
            assert len(rows) == 1, rows
            (live,) = fake.billing()
            assert live["id"] != lost_id and str(live["id"]) == str(rows[0]["provider_id"])
            assert lost_id in fake.destroyed()
            run.signal(signal.SIGTERM)
            code = await run.finish(within=120)
        assert code == 0, run.stderr
        assert fake.billing() == []
    (replacing,) = run.events("node_replacing")
    assert replacing["provider_id"] == str(lost_id) and replacing["replacement"] == 1
    assert first["local_url"] == second["local_url"], "the OpenAI port moved"
    assert len(run.events("prompt_rpc_listening")) == 1, "the RPC server was not kept"
    assert not alive(engine_pid)
