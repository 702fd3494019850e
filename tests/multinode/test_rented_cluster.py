"""Two rented nodes through the fake Vast API and a real OpenSSH sshd: the worker's RPC port
stays on its loopback, the main node reaches it through an SSH tunnel with a per-run key the
worker authorized for that port only, and both leases are torn down, confirmed."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, container_env
from tests.fakes.vastai_server import FakeVast
from tests.multinode.cluster_run import engine_log, is_weights, weights_of

KEY = "fake-vast-key-0123456789"
BUFFER = re.compile(r"RPC\d+\[(127\.0\.0\.1:\d+)\] model buffer size =\s*([0-9.]+) MiB")


def _two_offers(fake: FakeVast, node: Node, bin_dir: str, tmp: Path) -> dict[str, str]:
    """Two offers (a rented offer is gone), both "instances" on the test's sshd; the env."""
    for price in (0.40, 0.45):
        fake.add_offer(dph_total=price)
    fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
    return {
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(node.client_key), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(node.node_dir),
        **container_env(fake, tmp), "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        "MVP_RPC_BIN_DIR": bin_dir, "MVP_ENGINE_THREADS": "1",
        "MVP_RPC_AUTHORIZED_FILE": str(node.sshd.authorized),
        # Both "machines" are one sshd here, which can present one host key, not one per
        # instance: trust on first use (pinned first contact has its own tests).
        "MVP_VASTAI_PIN_HOST_KEY": "false",
    }


async def test_two_rented_nodes_serve_through_an_ssh_tunnel(
    node: Node, rpc_bin_dir: str, tiny_gguf: Path, tmp_path: Path
) -> None:
    sshd = node.sshd
    authorized_before = sshd.authorized.read_text()
    with FakeVast(api_key=KEY) as fake:
        env = _two_offers(fake, node, rpc_bin_dir, tmp_path)
        args = ["--yes", "--nodes", "2", "--gguf-local-path", str(tiny_gguf),
                "--prompt", "hello nodes", "--max-tokens", "12", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=240)
        assert code == 0, run.stderr
        assert fake.billing() == []
        assert len(fake.destroyed()) == 2
    (worker,) = weights_of(run, "RpcServerReady")
    (loaded,) = weights_of(run, "WeightsLoaded")
    # The main node reached the worker through its local tunnel end, not the worker's port.
    tunnel_ends = [m.group(1) for line in engine_log(run, 1) if (m := BUFFER.search(line))]
    assert len(tunnel_ends) == 1 and tunnel_ends[0] != worker["endpoint"]
    assert loaded["placement_mib"][tunnel_ends[0]] > 0  # type: ignore[index]
    assert run.events("prompt_done")[0]["tokens_generated"] >= 1
    authorize = next(
        f["payload"]["detail"]
        for f in run.frames("mvp.node.2.agent")
        if f["payload"].get("phase") == "rpc_authorize" and f["payload"]["status"] == "ready"
    )
    assert authorize["permitopen"] == worker["endpoint"]
    # The worker took its line out again; the private half is in no record and no output.
    assert sshd.authorized.read_text() == authorized_before
    records = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))
    everything = records + run.stderr + "".join(map(str, run.records))
    assert "PRIVATE KEY" not in everything and KEY not in everything
    engines = [int(p["engine_pid"]) for p in (worker, loaded)]  # type: ignore[call-overload]
    agents = [int(e["pid"]) for e in run.events("agent_started")]
    assert len(agents) == 2 and not any(alive(pid) for pid in engines + agents)


async def test_a_rented_worker_killed_mid_prompt_ends_the_run_named_both_destroyed(
    node: Node, rpc_bin_dir: str, slow_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = _two_offers(fake, node, rpc_bin_dir, tmp_path)
        args = ["--yes", "--nodes", "2", "--gguf-local-path", str(slow_gguf), "--prompt",
                "tell me a long story", "--max-tokens", "900", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            ready = await run.until(lambda r: is_weights(r, "RpcServerReady"), within=120)
            await run.until(event("text_delta"), within=120)
            os.kill(int(ready["payload"]["engine_pid"]), signal.SIGKILL)
            code = await run.finish(within=180)
        assert code == 1, run.stderr
        assert fake.billing() == [] and len(fake.destroyed()) == 2
    assert "worker node 2" in run.events("node_failed")[0]["reason"]
    assert "worker node 2" in run.events("run_finished")[-1]["reason"]
    (loaded,) = weights_of(run, "WeightsLoaded")
    agents = [int(e["pid"]) for e in run.events("agent_started")]
    engine = int(loaded["engine_pid"])  # type: ignore[call-overload]
    assert not any(alive(pid) for pid in [*agents, engine])
