"""A Vast interruptible lease outbid while it serves (`[vastai] rental = "bid"`): Vast pauses
the instance (`cur_state == intended_status == next_state == "stopped"`), the run takes it as
a lost host, destroys the paused one, confirmed, and brings up the next offer behind the same
prompt RPC and OpenAI addresses. The answers it served are journaled: afterwards `offers
--json` shows that GPU model's decode speed as measured, with the run's figure, and the
attempt's ~ready basis is this user's own history."""

from __future__ import annotations

import json
import signal
import statistics
from pathlib import Path

import httpx

from mvp_tui.lease.host_journal import HostJournal
from tests.e2e.headless import HeadlessRun, event, rpc_token
from tests.e2e.node import Node, vast_node_env
from tests.e2e.test_node_replacement import rpc_prompt
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.ssh.sshd import free_port

KEY = "fake-vast-key-0123456789"


async def openai_answers(base_url: str, api_key: str) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
        reply = await client.get(f"{base_url}/v1/models",
                                 headers={"Authorization": f"Bearer {api_key}"})
    assert reply.status_code == 200, reply.text


async def test_an_outbid_serving_node_is_replaced_and_its_speed_is_learned(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    rpc_port = free_port()
    state = tmp_path / "state"
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.10, min_bid=0.05, gpu_name="RTX 4090", gpu_mem_bw=1008.0)
        fake.add_offer(dph_total=0.20, min_bid=0.07, gpu_name="RTX 3090", gpu_mem_bw=936.0)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = {**vast_node_env(fake, node, KEY, tmp_path),
               "MVP_PROMPT_RPC_BIND": f"127.0.0.1:{rpc_port}", "MVP_VASTAI_RENTAL": "bid"}
        async with HeadlessRun(["--yes", "--gguf-local-path", str(tiny_gguf)], state, env) as run:
            first = await run.until(event("node_ready"), within=120)
            (endpoint,) = [json.loads(line) for line in [cli(
                "endpoint", "--json", env={**env, "MVP_STATE_DIR": str(state)}).stdout]]
            answer = await rpc_prompt_tokens(rpc_port, "before the outbid", rpc_token(state))
            assert answer[-1]["type"] == "done", answer
            (paused,) = [row["id"] for row in fake.instances()]
            creates = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
            assert creates[0].body["price"] == 0.05  # a bid: min_bid × bid_factor 1.0
            fake.outbid(paused)  # a higher bid took the GPU: paused, not destroyed
            await run.until(lambda _: len(run.events("node_ready")) >= 2, within=120)
            second = run.events("node_ready")[1]
            answer = await rpc_prompt_tokens(rpc_port, "after the outbid", rpc_token(state))
            assert answer[-1]["type"] == "done", answer
            await openai_answers(second["local_url"], endpoint["api_key"])
            assert paused in fake.destroyed()  # the paused one: it billed storage
            (live,) = fake.billing()
            assert live["is_bid"] is True
            run.signal(signal.SIGTERM)
            code = await run.finish(within=120)
        assert code == 0, run.stderr
        assert fake.billing() == []
        (replacing,) = run.events("node_replacing")
        assert replacing["provider_id"] == str(paused)
        assert first["local_url"] == second["local_url"], "the OpenAI port moved"
        assert len(run.events("prompt_rpc_listening")) == 1, "the RPC server was not kept"

        # What the run measured, as the next `offers --json` shows it.
        journal = HostJournal(state)
        journal.read()
        on_4090 = [s.decode_tok_s for s in journal.speeds if s.gpu_name == "RTX 4090"]
        assert on_4090, journal.speeds
        fake.add_offer(dph_total=0.30, min_bid=0.06, gpu_name="RTX 4090", gpu_mem_bw=1008.0)
        fake.add_offer(dph_total=0.30, min_bid=0.06, gpu_name="RTX A6000", gpu_mem_bw=768.0)
        listed = cli("offers", "--json", env={**env, "MVP_STATE_DIR": str(state),
                                              "MVP_GGUF_LOCAL_PATH": str(tiny_gguf)})
        assert listed.returncode == 0, listed.stderr
        rows = {r["gpu_name"]: r for r in json.loads(listed.stdout)}
    learned, fresh = rows["RTX 4090"], rows["RTX A6000"]
    assert learned["measured"] is True
    assert learned["tok_per_s"] == round(statistics.median(on_4090), 1)
    assert fresh["measured"] is False and fresh["tok_per_s"] > 0
    assert learned["ready"]["basis"] == "history"  # the 4090 attempt that served


async def rpc_prompt_tokens(port: int, text: str, token: str) -> list[dict[str, object]]:
    """A prompt long enough to be journaled (the speed log skips answers under 8 tokens)."""
    return await rpc_prompt(port, text, token, max_tokens=32)
