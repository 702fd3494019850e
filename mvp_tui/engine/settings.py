"""Config → the typed settings the engine's parts take, built once per run.

One frozen object per area, each with `from_config`: `RuntimeSettings` ([runtime],
[observability]), `ModelSettings` ([model]) here; [prompt] is its section's own settings
(`PromptSection`, mvp_tui/config/sections/prompt.py); the others live
with the part they configure: `SshSettings` (mvp_tui/ssh/settings.py), `WalkSettings`
(mvp_tui/lease/settings.py), `Limits` (mvp_tui/engine/limits.py), `WatchdogSettings`
(mvp_tui/engine/watchdog.py), and the offer policy (`selection_policy`). `RunSettings` holds
them all for one run. What a 0, an empty list or empty text means is settled by the key table
when the config loads, so no reader here has a default of its own: each class names the keys
it copies (`KEYS`), and a field's default is its key's declared default
(tests/foundation/test_settings_from_sections.py holds every such class to it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config import Config
from mvp_tui.config.defaults import DEFAULT_HF_FILE
from mvp_tui.config.loader import served_name
from mvp_tui.config.sections.model import ModelSection
from mvp_tui.config.sections.prompt import PromptSection
from mvp_tui.config.values import Source
from mvp_tui.engine.attempt_walk import AttemptSettings
from mvp_tui.engine.limits import Limits
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.node_protocol import PREFETCH_ENV, AgentEnv, SwitchEnv, passed_through
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.prefetch import wants_prefetch
from mvp_tui.providers.runpod.section import RunpodSection
from mvp_tui.providers.runpod.volumes import VOLUME_CACHE_DIR, VolumeSettings
from mvp_tui.providers.vastai.section import VastaiSection
from mvp_tui.ssh.settings import SshSettings

# Env names from the caller's environment that the node needs when present (never logged),
# besides the node env's own passthrough variables (`node_protocol.passed_through`): the
# hub's token, and what the seed's node spec passes on (002: `node_spec`; llama.cpp ignores
# what it does not use).
PASS_THROUGH_ENV = ("HF_TOKEN", "CUDA_DEVICE_SCHEDULE")


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """[runtime] and [observability]: who this run and node are, where their parts live."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "run_id": "runtime.run_id",
        "node_id": "runtime.node_id",
        "stage_index": "runtime.stage_index",
        "layer_end_exclusive": "runtime.layer_end_exclusive",
        "node_python": "runtime.node_python",
        "node_dir": "runtime.node_dir",
        "frame_log": "observability.datastream_frame_log",
        "bootstrap_command": "vastai.bootstrap_command",
    }

    run_id: str | None  # None: a new unique id per run
    node_id: int
    stage_index: int
    layer_end_exclusive: int
    node_python: str
    node_dir: str
    frame_log: Path | None  # archive every datastream frame here
    # [vastai] bootstrap_command: run on the node after the agent is set up and started.
    bootstrap_command: str | None
    # The node's model cache when the provider mounts one ([runpod] network_volume).
    model_cache_dir: str | None

    @classmethod
    def from_config(cls, config: Config) -> RuntimeSettings:
        runtime, vast = config.settings.runtime, config.settings.of(VastaiSection)
        return cls(
            run_id=runtime.run_id,
            node_id=runtime.node_id,
            stage_index=runtime.stage_index,
            layer_end_exclusive=runtime.layer_end_exclusive,
            node_python=runtime.node_python,
            node_dir=runtime.node_dir,
            frame_log=config.settings.observability.datastream_frame_log,
            bootstrap_command=vast.bootstrap_command if vast else None,
            model_cache_dir=VOLUME_CACHE_DIR if volume_settings(config) else None,
        )


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """[model]: what the node serves (the file and repo as `config.model_source` settles them)."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "model_id": "model.id",
        "gguf_local_path": "model.gguf_local_path",
        "gguf_repo": "model.gguf_repo",
        "gguf_file": "model.gguf_file",
        "gguf_revision": "model.gguf_revision",
        "tokenizer_local_path": "model.tokenizer_local_path",
        "max_context": "model.max_context",
        "parallel": "model.parallel",
        "download_floor_mbps": "model.download_floor_mbps",
        "download_floor_window_s": "model.download_floor_window_secs",
        "allow_partial_offload": "model.allow_partial_offload",
    }

    model_id: str
    gguf_local_path: Path | None  # set: served instead of the hub (config's model_source)
    gguf_repo: str
    gguf_file: str
    gguf_revision: str | None
    tokenizer_local_path: Path | None
    max_context: int | None  # None: the engine's default
    # The engine's slots (requests at once, each with max_context); None: as many as fit, ≤ 4.
    parallel: int | None = ModelSection.parallel
    # A download under this rate (Mbit/s) for a whole window is the host's failure.
    download_floor_mbps: float = ModelSection.download_floor_mbps
    download_floor_window_s: float = ModelSection.download_floor_window_secs
    # Fewer layers on the GPU than asked (or no CUDA device) is a warning, not the host's failure.
    allow_partial_offload: bool = ModelSection.allow_partial_offload

    @classmethod
    def from_config(cls, config: Config) -> ModelSettings:
        model, source = config.settings.model, config.model_source  # the seed's layering
        model_id = model.id
        unnamed = config.sources.get("model.id", Source("default")).layer == "default"
        if unnamed and source.local_path is None and source.file != DEFAULT_HF_FILE:
            # Another hub file than the default's, and no name set: the default's name would
            # tell OpenAI clients the wrong model, so it is named after its file.
            model_id = served_name(source.file)
        return cls(
            model_id=model_id,
            gguf_local_path=source.local_path,
            gguf_repo=source.repo,
            gguf_file=source.file,
            gguf_revision=source.revision,
            tokenizer_local_path=model.tokenizer_local_path,
            max_context=model.max_context,
            parallel=model.parallel,
            download_floor_mbps=model.download_floor_mbps,
            download_floor_window_s=model.download_floor_window_secs,
            allow_partial_offload=model.allow_partial_offload,
        )


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Every area's settings for one run, built once from the config (`RunEngine` does, in
    its constructor); the run reads only these. The walk's node env and SSH key are added
    when a lease is made (they depend on the run id and the loaded key)."""

    KEYS: ClassVar[Mapping[str, str]] = {}  # each part takes its own (and [prompt] is its section)

    runtime: RuntimeSettings
    model: ModelSettings
    prompt: PromptSection
    ssh: SshSettings
    limits: Limits
    policy: SelectionPolicy
    walk: WalkSettings
    attempts: AttemptSettings

    @classmethod
    def from_config(cls, config: Config) -> RunSettings:
        return cls(
            runtime=RuntimeSettings.from_config(config),
            model=ModelSettings.from_config(config),
            prompt=config.settings.prompt,
            ssh=SshSettings.from_config(config),
            limits=Limits.from_config(config),
            policy=selection_policy(config),
            walk=WalkSettings.from_config(config),
            attempts=AttemptSettings.from_config(config),
        )


def selection_policy(config: Config, limit: int = 64) -> SelectionPolicy:
    """The offer filter. Provider keys are only read for the provider that runs; the price
    cap is the one the walk keeps (unset or 0: none)."""
    vast = config.settings.of(VastaiSection)
    return SelectionPolicy(
        gpu_name=vast.gpu_name if vast else None,
        min_gpu_ram_mb=vast.min_gpu_ram_mb if vast else None,
        min_down_mbps=vast.min_down_mbps if vast else None,
        min_up_mbps=vast.min_up_mbps if vast else None,
        min_reliability=vast.min_reliability if vast else None,
        require_verified=vast.require_verified if vast else False,
        max_price_per_hour=config.settings.limits.max_price_per_hour,
        limit=limit,
        # Vast's search and its client-side check: the image's CUDA floor, the disk asked.
        min_cuda=_floor(config.cuda_floor()) if vast else None,
        disk_gb=float(vast.disk_gb) if vast else None,
    )


def _floor(text: str | None) -> float | None:
    return float(text) if text is not None else None


def node_env(
    runtime: RuntimeSettings,
    model: ModelSettings,
    *,
    provider: str,
    run_id: str,
    environ: Mapping[str, str] | None = None,
    vram_need_mib: int = 0,
    kv_slot_mib: int = 0,
) -> dict[str, str]:
    """The node agent's environment for this run and model (`AgentEnv`, and the provider the
    switch falls back on), with what the caller's environment passes through; `vram_need_mib`
    is the fit's need per node when the run has read it (0: unknown), `kv_slot_mib` one slot's
    KV cache per node at the context (the node adds slots while its memory holds them)."""
    environ = os.environ if environ is None else environ
    local = model.gguf_local_path
    agent = AgentEnv(
        run_id=run_id,
        node_id=runtime.node_id,
        stage_index=runtime.stage_index,
        layer_end_exclusive=runtime.layer_end_exclusive,
        model_id=model.model_id,
        gguf_local_path=str(local) if local is not None else "",
        gguf_repo=model.gguf_repo if local is None else "",
        gguf_file=model.gguf_file if local is None else "",
        gguf_revision=(model.gguf_revision if local is None else None) or AgentEnv.gguf_revision,
        node_python=runtime.node_python,
        tokenizer_local_path=str(model.tokenizer_local_path or ""),
        max_context=model.max_context or 0,
        download_floor_mbps=model.download_floor_mbps,
        download_floor_window_s=(
            model.download_floor_window_s
            if model.download_floor_mbps > 0
            else AgentEnv.download_floor_window_s
        ),
        vram_need_mib=vram_need_mib,
        kv_slot_mib=kv_slot_mib,
        parallel=model.parallel or 0,
        allow_partial_offload=model.allow_partial_offload,
    )
    always = ["run_id", "node_id", "stage_index", "layer_end_exclusive", "model_id"]
    if local is None:  # the hub's keys as the seed writes them, a revision when one is set
        always += ["gguf_repo", "gguf_file"] + (["gguf_revision"] if model.gguf_revision else [])
    env = agent.to_env(tuple(always))
    env.update(SwitchEnv(node_provider=provider).to_env(("node_provider",)))
    env.update(passed_through(environ))
    env.update({name: environ[name] for name in PASS_THROUGH_ENV if environ.get(name)})
    if runtime.model_cache_dir:  # on the network volume: it outlives the pod
        env[AgentEnv.env_name("model_cache_dir")] = runtime.model_cache_dir
    return env


# Secrets of the node env that reach a rented node only in its launcher run.sh (mode 600).
SSH_ONLY_ENV = frozenset({"HF_TOKEN", AgentEnv.env_name("api_key")})


def volume_settings(config: Config) -> VolumeSettings | None:
    """[runpod] network_volume and its keys, on a RunPod run that names one."""
    runpod = config.settings.of(RunpodSection)
    return None if runpod is None else VolumeSettings.from_section(runpod)


def create_env(node: Mapping[str, str]) -> dict[str, str]:
    """What goes into a marketplace create request: the node env without secrets (the
    provider shows a create's env in its UI; secrets reach the node over SSH only). A hub
    model without a token is fetched by the start command at boot (providers/prefetch.py)."""
    env = {k: v for k, v in node.items() if k not in SSH_ONLY_ENV}
    if wants_prefetch(dict(node)):
        env[PREFETCH_ENV] = "1"
    return env
