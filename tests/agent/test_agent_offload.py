"""The offload proof through the agent: a fake `llama-server` that prints a recorded load
log (tests/agent/logs/), on a node whose probe finds a GPU (a fake `nvidia-smi` on PATH, as
the probe runs it) or none."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.node_protocol import ENGINE_OFFLOAD, NODE_AGENT_NOTICE, offload_report
from tests.agent.agent_run import AgentRun, agent_env

LOGS = Path(__file__).parent / "logs"
H100 = "NVIDIA H100 80GB HBM3, 81559 MiB"


@pytest.fixture
def gpu_node(fake_llama_server_dir: Path) -> Path:
    """The fake llama-server's directory with an `nvidia-smi` that answers the probe's query
    with one H100."""
    smi = fake_llama_server_dir / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nprint({H100!r})\n")
    smi.chmod(0o755)
    return fake_llama_server_dir


def node_env(tmp_path: Path, model: Path, bin_dir: Path, log: str, **extra: str) -> dict[str, str]:
    return agent_env(
        tmp_path,
        PATH=f"{bin_dir}:/usr/bin:/bin",
        MVP_GGUF_LOCAL_PATH=str(model),
        FAKE_LOG_FILE=str(LOGS / log),
        FAKE_READY_HINT_AFTER_S="0.2",  # then "main: model loaded", as llama-server says
        **extra,
    )


def argv_of(run: AgentRun) -> list[str]:
    argv: list[str] = json.loads(run.channel("mvp.node.1.engine")[0])["argv"]
    return argv


def offload_record(run: AgentRun) -> dict[str, Any] | None:
    found: dict[str, Any] | None = run.find(
        lambda ch, p: ch == "mvp.node.1.agent" and isinstance(p, dict)
        and p.get("type") == ENGINE_OFFLOAD
    )
    return found


async def test_a_gpu_node_whose_engine_offloaded_nothing_fails_the_attempt_as_the_hosts(
    tmp_path: Path, tiny_model: Path, gpu_node: Path
) -> None:
    """The fit says it fits, so every layer is asked; the engine's log says 0/3 with only
    host buffers (a CPU build's, recorded): the host's failure, naming the cause."""
    env = node_env(tmp_path, tiny_model, gpu_node, "cpu_build_ngl0.log", MVP_VRAM_NEED_MIB="600")
    run = await AgentRun.start(env)
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal", fatal
        assert fatal["scope"] == "host"  # the run engine gives the host up: next offer
        assert fatal["reason"].startswith("GPU offload not proven: 0/3 layers offloaded to GPU")
        assert "names no CUDA device" in fatal["reason"]
        assert "allow_partial_offload" in fatal["fix"]
        assert fatal["offload"]["layers"] == 0 and fatal["offload"]["asked"] == "all"
        argv = argv_of(run)
        assert argv[argv.index("-ngl") + 1] == "999" and argv[argv.index("-lv") + 1] == "4"
        record = offload_record(run)
        assert record is not None
        report = offload_report(record)
        assert report is not None and (report.layers, report.total) == (0, 3)
        assert not report.ok and not report.allowed
        assert ("engine_health", "failed") in run.phases()
        assert await run.wait_exit() == 1
    finally:
        await run.kill()


async def test_a_gpu_node_with_every_layer_on_cuda0_serves_and_reports_it(
    tmp_path: Path, tiny_model: Path, gpu_node: Path
) -> None:
    env = node_env(tmp_path, tiny_model, gpu_node, "cuda_v100_ggml_ci.log",
                   MVP_VRAM_NEED_MIB="2400")
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        record = offload_record(run)
        assert record is not None and record["gpus"] == ["NVIDIA H100 80GB HBM3"]
        report = offload_report(record)
        assert report is not None and report.ok
        assert report.summary() == "33/33 layers · CUDA0 1,455 MiB"
        assert "-ngl" in argv_of(run) and "--fit" not in argv_of(run)
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


async def test_allow_partial_offload_serves_with_a_warning(
    tmp_path: Path, tiny_model: Path, gpu_node: Path
) -> None:
    env = node_env(tmp_path, tiny_model, gpu_node, "cpu_build_ngl0.log",
                   MVP_VRAM_NEED_MIB="600", MVP_ALLOW_PARTIAL_OFFLOAD="1")
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        record = offload_record(run)
        assert record is not None and record["allowed"] is True and record["problem"]
        notice = run.find(lambda ch, p: isinstance(p, dict) and p.get("type") == NODE_AGENT_NOTICE
                          and "allow_partial_offload" in p.get("message", ""))
        assert notice is not None and "0/3 layers" in notice["message"]
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


@pytest.mark.parametrize(("no_fit", "no_lv", "flag"),
                         [("", "", "--fit"), ("1", "", "-ngl"), ("1", "1", "-ngl")])
async def test_an_unknown_need_asks_fit_on_unless_the_build_predates_it(
    tmp_path: Path, tiny_model: Path, gpu_node: Path, no_fit: str, no_lv: str, flag: str
) -> None:
    """The fake refuses a flag its help does not name, as llama-server does: a build from
    before `--fit` gets every layer, one from before `-lv` no `-lv` either, and both serve."""
    env = node_env(tmp_path, tiny_model, gpu_node, "cuda_v100_ggml_ci.log", FAKE_NO_FIT=no_fit,
                   FAKE_NO_VERBOSITY=no_lv)
    run = await AgentRun.start(env)
    try:
        assert (await run.weights())["type"] == "WeightsLoaded"
        argv = argv_of(run)
        assert flag in argv and ("--fit" in argv) == (not no_fit)
        assert ("-lv" in argv) == (not no_lv)
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


async def test_a_cpu_node_is_unaffected(
    tmp_path: Path, tiny_model: Path, fake_llama_server_dir: Path
) -> None:
    """No GPU: no -ngl, no --fit, no proof asked; 0/N layers is what a CPU node does."""
    env = node_env(tmp_path, tiny_model, fake_llama_server_dir, "cpu_build_ngl0.log",
                   MVP_VRAM_NEED_MIB="600")
    run = await AgentRun.start(env)
    try:
        assert (await run.weights())["type"] == "WeightsLoaded"
        argv = argv_of(run)
        assert not {"-ngl", "--fit", "-lv"} & set(argv)
        assert offload_record(run) is None
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()
