"""Several local nodes serving one model on llama.cpp's RPC backend, headless, with the real
`ggml-rpc-server` and `llama-server`: the layers land on the worker (proved by the main
node's log), a worker that dies or freezes ends the run cleanly, nothing is left running."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event
from tests.multinode.cluster_run import cluster_run, engine_log, is_weights, run_pids, weights_of

BUFFER = re.compile(r"RPC\d+\[(127\.0\.0\.1:\d+)\] model buffer size =\s*([0-9.]+) MiB")
LONG_ANSWER = ("--prompt", "tell me a long story", "--max-tokens", "900", "--down-after")


async def _worker_serving(run: HeadlessRun) -> int:
    """The worker's ggml-rpc-server pid, once the answer is streaming."""
    ready = await run.until(lambda r: is_weights(r, "RpcServerReady"), within=120)
    await run.until(event("text_delta"), within=120)
    return int(ready["payload"]["engine_pid"])


def _assert_all_torn_down(run: HeadlessRun) -> None:
    created = {e["provider_id"] for e in run.events("attempt_answered") if e.get("provider_id")}
    deleted = {e["provider_id"] for e in run.events("lease_deleted")}
    assert len(created) == 2 and deleted == created
    assert not any(alive(pid) for pid in run_pids(run))


async def test_two_local_nodes_stream_with_buffers_on_the_worker(
    rpc_bin_dir: str, tiny_gguf: Path, tmp_path: Path
) -> None:
    run = cluster_run(
        rpc_bin_dir, tiny_gguf, tmp_path / "state",
        "--prompt", "hello there", "--max-tokens", "16", "--down-after",
    )
    async with run:
        code = await run.finish(within=120)
    assert code == 0, run.stderr
    (worker,) = weights_of(run, "RpcServerReady")
    assert worker["node_id"] == 2
    endpoint = str(worker["endpoint"])
    # Proof of placement from the main node's own log, not from the agent's summary.
    on_worker = [m for line in engine_log(run, 1) if (m := BUFFER.search(line))]
    assert [m.group(1) for m in on_worker] == [endpoint]
    assert float(on_worker[0].group(2)) > 0
    (loaded,) = weights_of(run, "WeightsLoaded")
    assert loaded["node_id"] == 1 and loaded["placement_mib"][endpoint] > 0  # type: ignore[index]
    assert loaded["auth"] == "key"  # behind the gate, as one node is: the prompt had the key
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
    assert "".join(e["text"] for e in run.events("text_delta")) == done["final_text"]
    # Two leases, each torn down and confirmed; no process of the run is left.
    created = {e["provider_id"] for e in run.events("attempt_answered") if e.get("provider_id")}
    deleted = {e["provider_id"] for e in run.events("lease_deleted")}
    assert len(created) == 2 and deleted == created
    pids = run_pids(run)
    assert len(pids) == 4 and not any(alive(pid) for pid in pids)
    assert run.events("run_finished")[-1]["exit_code"] == 0
    # The seed's stage steps, in order, on the orchestrator's bootstrap channel.
    steps = [
        (f["payload"]["phase"], f["payload"]["status"]) for f in run.frames("mvp.orch.bootstrap")
    ]
    order = [("stage_provision", "ready"), ("node_join", "ready"), ("node_route", "ready"),
             ("weights_loaded", "ready")]
    assert [steps.index(step) for step in order] == sorted(steps.index(step) for step in order)


async def test_seed_stages_place_the_layers_as_configured(
    rpc_bin_dir: str, four_layer_gguf: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[runtime]\nnodes = 2\nnode_stages = ["0:3", "1:4"]\n')
    run = cluster_run(
        rpc_bin_dir, four_layer_gguf, tmp_path / "state",
        "--config", str(config), "--prompt", "hi", "--max-tokens", "4", "--down-after",
        nodes=None,
    )
    async with run:
        code = await run.finish(within=120)
    assert code == 0, run.stderr
    log = engine_log(run, 1)
    # Main keeps layers 0..2; layer 3 and the output layer go to the worker.
    assert any("offloaded 2/5 layers" in line for line in log), log
    argv = next(
        f["payload"]["detail"]["argv"]
        for f in run.frames("mvp.node.1.agent")
        if f["payload"].get("phase") == "engine_start" and f["payload"]["status"] == "ready"
    )
    assert argv[argv.index("-ngl") + 1] == "2" and argv[argv.index("--tensor-split") + 1] == "2"
    (loaded,) = weights_of(run, "WeightsLoaded")
    placement = loaded["placement_mib"]
    assert isinstance(placement, dict)
    worker_mib = sum(v for k, v in placement.items() if k.startswith("127.0.0.1:"))
    assert worker_mib > 0 and placement.get("CPU_Mapped", placement.get("CPU", 0)) > 0


async def test_a_worker_killed_mid_prompt_fails_the_run_named(
    rpc_bin_dir: str, slow_gguf: Path, tmp_path: Path
) -> None:
    run = cluster_run(rpc_bin_dir, slow_gguf, tmp_path / "state", *LONG_ANSWER)
    async with run:
        os.kill(await _worker_serving(run), signal.SIGKILL)
        code = await run.finish(within=120)
    assert code == 1, run.stderr
    assert not run.events("prompt_done")
    failed = run.events("node_failed")[0]
    assert "worker node 2" in failed["reason"], failed
    assert "worker node 2" in run.events("run_finished")[-1]["reason"]
    _assert_all_torn_down(run)


async def test_a_frozen_worker_trips_the_stall_watchdog(
    rpc_bin_dir: str, slow_gguf: Path, tmp_path: Path
) -> None:
    stall = 3.0
    run = cluster_run(
        rpc_bin_dir, slow_gguf, tmp_path / "state", *LONG_ANSWER, "--stall-secs", str(stall)
    )
    async with run:
        pid = await _worker_serving(run)
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            failed = await run.until(event("node_failed"), within=stall + 5)
            took = time.monotonic() - stopped_at
            code = await run.finish(within=120)  # the teardown copes with the stopped worker
        finally:
            stopped_left = alive(pid)
            if stopped_left:
                os.kill(pid, signal.SIGCONT)  # never leave a stopped process behind
    assert took <= stall + 5
    assert code == 1, run.stderr
    assert "no token" in failed["reason"] and "worker node 2" in failed["reason"], failed
    assert not stopped_left
    _assert_all_torn_down(run)
