"""Config → the value objects the engine's parts take (policy, walk settings, node env)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from mvp_tui.config import Config
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.base import SelectionPolicy

# Env names from the caller's environment that the node needs when present (never logged).
# MVP_NODE_PROVIDER_ENV_FILE tells the node's switch where the instance's own credentials are
# when not in PID 1's environment (images that start the agent's shell differently; tests).
PASS_THROUGH_ENV = (
    "MVP_MODEL_CACHE_DIR",
    "HF_TOKEN",
    "MVP_HF_ENDPOINT",
    "MVP_NODE_PROVIDER_ENV_FILE",
)


def selection_policy(config: Config, limit: int = 64) -> SelectionPolicy:
    """The offer filter. Provider keys are only read for the provider that runs."""
    vast = config.provider == "vastai"
    return SelectionPolicy(
        gpu_name=config.get_str("vastai.gpu_name") if vast else None,
        min_gpu_ram_mb=config.get_int("vastai.min_gpu_ram_mb") if vast else None,
        min_down_mbps=config.get_float("vastai.min_down_mbps") if vast else None,
        min_up_mbps=config.get_float("vastai.min_up_mbps") if vast else None,
        min_reliability=config.get_float("vastai.min_reliability") if vast else None,
        require_verified=config.get_bool("vastai.require_verified") if vast else False,
        max_price_per_hour=config.get_float("limits.max_price_per_hour"),
        limit=limit,
    )


def node_env(
    config: Config, run_id: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The node agent's environment: the seed's MVP_* keys for this run and model."""
    environ = os.environ if environ is None else environ
    env = {
        "MVP_RUN_ID": run_id,
        "MVP_LOGICAL_NODE_ID": str(config.get_int("runtime.node_id") or 1),
        "MVP_STAGE_INDEX": str(config.get_int("runtime.stage_index") or 0),
        "MVP_LAYER_END_EXCLUSIVE": str(config.get_int("runtime.layer_end_exclusive") or 16),
        "MVP_NODE_PROVIDER": config.provider,
        "MVP_MODEL_ID": config.get_str("model.id") or "",
    }
    local_path = config.get_path("model.gguf_local_path")
    if local_path is not None:
        env["MVP_GGUF_LOCAL_PATH"] = str(local_path)
    else:
        env["MVP_GGUF_REPO"] = config.get_str("model.gguf_repo") or ""
        env["MVP_GGUF_FILE"] = config.get_str("model.gguf_file") or ""
        if revision := config.get_str("model.gguf_revision"):
            env["MVP_GGUF_REVISION"] = revision
    if (python := config.get_str("runtime.node_python")) and python != "python3":
        env["MVP_NODE_PYTHON"] = python
    if tokenizer := config.get_path("model.tokenizer_local_path"):
        env["MVP_TOKENIZER_LOCAL_PATH"] = str(tokenizer)
    if (max_context := config.get_int("model.max_context")) is not None:
        env["MVP_MAX_CONTEXT"] = str(max_context)
    for name in PASS_THROUGH_ENV:
        if environ.get(name):
            env[name] = environ[name]
    return env


def create_env(node: Mapping[str, str]) -> dict[str, str]:
    """What goes into a marketplace create request: the node env without secrets (the
    provider shows a create's env in its UI; secrets reach the node over SSH only)."""
    return {k: v for k, v in node.items() if k != "HF_TOKEN"}


def walk_settings(
    config: Config, *, env: Mapping[str, str], ssh_public_key: str | None
) -> WalkSettings:
    waits = tuple(config.get_floats("lease.reconcile_waits_secs") or (5.0, 15.0))
    vast = config.provider == "vastai"
    image = config.get_str("image.node") or ""
    if vast and (vast_image := config.get_str("vastai.image")):
        image = vast_image
    poll = float(config.get_int("vastai.poll_interval_secs") or 5) if vast else 0.5
    max_price = config.get_float("limits.max_price_per_hour")
    return WalkSettings(
        reconcile_waits_s=waits,
        poll_interval_s=poll,
        ready_timeout_s=config.get_float("lease.ready_timeout_secs") or 900.0,
        delete_timeout_s=config.get_float("lease.delete_timeout_secs") or 120.0,
        delete_poll_s=min(2.0, poll),
        max_price_per_hour=max_price if max_price else None,
        label_prefix=config.get_str("lease.label_prefix") or "mvp",
        node_id=config.get_int("runtime.node_id") or 1,
        image=image,
        disk_gb=(config.get_int("vastai.disk_gb") or 50) if vast else 20,
        env=dict(env),
        onstart=config.get_str("vastai.onstart") if vast else None,
        ssh_public_key=ssh_public_key,
    )
