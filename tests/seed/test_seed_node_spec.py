"""The node's spec as the seed writes it: one `ProvisionStart` for the run, before
`node_spec`; `node_spec` carries `relay_mode`, `docker_gpus` and `provider_config`;
`serve_prompts` carries `poll_interval_ms`; the Docker `provider_config` has the seed's keys
(`docker_gpus`, `cached_model {host_path_present, file, container_path}`) and no host path;
the Docker node's env has `MVP_DOCKER_GPUS` and the seed's pass-through variables when set.
The real engine's records on its hub and the real container spec (no daemon needed).
Contract: 002_…txt `run`, `provider_datastream_detail`, `node_spec`, `node_spec_env_keys`;
001_…txt (the Docker node's env)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.run import RunEngine
from mvp_tui.lease.events import AttemptStarted
from mvp_tui.prompt.events import PromptRpcListening
from mvp_tui.providers.docker.spec import create_config, stdin_env

PASS_THROUGH = {
    "CUDA_DEVICE_SCHEDULE": "spin",
    "MVP_TOKEN_PROGRESS_EVERY": "4",
    "MVP_CPU_LINE_PROFILE": "1",
    "MVP_CPU_LINE_PROFILE_INTERVAL_MS": "250",
}


def docker_engine(tmp_path: Path, environ: dict[str, str]) -> RunEngine:
    cache = tmp_path / "host-cache-dir"
    cache.mkdir()
    model = cache / "seed-model.gguf"
    model.write_bytes(b"GGUF")
    env = {"MVP_NODE_PROVIDER": "docker", "MVP_CACHED_MODEL_HOST_PATH": str(model),
           "MVP_DOCKER_GPUS": "device=0", "MVP_STATE_DIR": str(tmp_path / "state"),
           "MVP_IROH_RELAY_MODE": "disabled"}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    return RunEngine(config, lambda _event: None, environ=environ)


def attempt(n: int) -> AttemptStarted:
    return AttemptStarted(run_id="41", label=f"mvp-41-1-{n}", offer_id="local",
                          gpu_name="CPU", price_per_hour=0.0, attempt=n)


async def test_one_provision_start_before_the_node_spec_with_the_seeds_fields(
    tmp_path: Path,
) -> None:
    engine = docker_engine(tmp_path, {})
    frames: list[Frame] = []
    engine.hub.listeners.append(frames.append)
    try:
        engine.started()
        engine.ctx.emit(attempt(1))
        engine.ctx.emit(attempt(2))  # the walk's next offer: no second ProvisionStart
        engine.ctx.emit(PromptRpcListening(host="127.0.0.1", port=19777))
    finally:
        await engine.aclose()
    steps = []
    for frame in frames:
        record = json.loads(frame.payload)
        if frame.channel == "mvp.provisioning.events":
            steps.append(("event", record["event"]["kind"], record["event"]))
        elif frame.channel == "mvp.orch.bootstrap":
            steps.append(("phase", record["phase"], record["detail"]))
    kinds = [name for what, name, _ in steps if what == "event"]
    assert kinds == ["ProvisionStart"], kinds
    names = [name for _, name, _ in steps]
    assert names.index("ProvisionStart") == names.index("node_spec") - 1
    assert names.index("node_provisioner") < names.index("ProvisionStart")
    start = next(d for _, n, d in steps if n == "ProvisionStart")
    assert start["provider"] == "docker" and start["message"].startswith("starting docker image ")
    spec = next(d for _, n, d in steps if n == "node_spec")
    assert spec["relay_mode"] == "disabled"
    assert spec["docker_gpus"] == "device=0"
    assert spec["provider_config"]["docker_gpus"] == "device=0"
    assert "MVP_DOCKER_GPUS" in spec["env_keys"]
    serve = next(d for _, n, d in steps if n == "serve_prompts")
    assert serve["mode"] == "single_active_prompt"
    assert serve["poll_interval_ms"] == 0, "pushed, nothing polls (docs/seed-compatibility.md)"


async def test_dockers_provider_config_has_the_seeds_keys_and_no_host_path(
    tmp_path: Path,
) -> None:
    engine = docker_engine(tmp_path, {})
    frames: list[Frame] = []
    engine.hub.listeners.append(frames.append)
    try:
        engine.started()
    finally:
        await engine.aclose()
    details = {
        json.loads(f.payload)["phase"]: json.loads(f.payload)["detail"]
        for f in frames
        if f.channel == "mvp.orch.bootstrap"
    }
    for provider_config in (
        details["config"]["provider_config"],
        details["node_provisioner"]["config"],
        details["node_spec"]["provider_config"],
    ):
        assert provider_config["docker_gpus"] == "device=0"
        assert provider_config["cached_model"] == {
            "host_path_present": True,
            "file": "seed-model.gguf",
            "container_path": "/models/cached/seed-model.gguf",
        }
        assert "gpus" not in provider_config and "cached_model_host_path" not in provider_config
    assert not any(b"host-cache-dir" in f.payload for f in frames)  # no host path anywhere


@pytest.mark.parametrize("passed", [PASS_THROUGH, {}])
async def test_the_docker_nodes_env_has_its_gpus_and_the_seeds_pass_through(
    tmp_path: Path, passed: dict[str, str]
) -> None:
    engine = docker_engine(tmp_path, {**passed, "UNRELATED_VAR": "x"})
    try:
        settings = engine.provider.settings  # type: ignore[attr-defined]
        _, body = create_config(
            settings, image="mvp-node:latest", label="mvp-41-1-1", request_env=engine.ctx.node_env
        )
        # What the node's process sees: the container's Env, and the names that look like
        # secrets (MVP_TOKEN_…), which follow the agent down its stdin instead.
        piped = stdin_env(settings, engine.ctx.node_env)
    finally:
        await engine.aclose()
    env = {**dict(item.split("=", 1) for item in body["Env"]), **piped}
    assert env["MVP_DOCKER_GPUS"] == "device=0"
    for name in PASS_THROUGH:
        assert env.get(name) == passed.get(name), name  # when set, and only then
    assert "UNRELATED_VAR" not in env
