"""[model]: what the node serves (which of a local file and the hub: model_source.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config.defaults import DEFAULT_HF_FILE, DEFAULT_HF_REPO, DEFAULT_MODEL_ID
from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class ModelSection(Section):
    """[model]: the model served; which source wins is `config.model_source`."""

    NAME: ClassVar[str] = "model"

    id: str = key(
        DEFAULT_MODEL_ID, "model name served by the engine", env="MVP_MODEL_ID", flag="--model-id",
    )
    gguf_local_path: Path | None = key(
        None,
        "GGUF file on the node; served unless a hub key (gguf_repo, gguf_file, gguf_revision) is "
        "set in the same layer or a later one",
        env="MVP_GGUF_LOCAL_PATH", flag="--gguf-local-path", example="~/models/tiny.gguf",
    )
    gguf_repo: str = key(
        DEFAULT_HF_REPO, "Hugging Face repo of the GGUF", env="MVP_GGUF_REPO", flag="--gguf-repo",
    )
    gguf_file: str = key(
        DEFAULT_HF_FILE, "GGUF file in that repo", env="MVP_GGUF_FILE", flag="--gguf-file",
    )
    gguf_revision: str | None = key(
        None, "repo revision (branch, tag or commit)", env="MVP_GGUF_REVISION",
        flag="--gguf-revision", example="main",
    )
    tokenizer_local_path: Path | None = key(
        None, "tokenizer file; unset = the GGUF's own", env="MVP_TOKENIZER_LOCAL_PATH",
        flag="--tokenizer-local-path",
        inert=(
            "llama.cpp reads the tokenizer embedded in the GGUF file; this engine serves the "
            "whole model from that one file"
        ),
        example="~/models/tokenizer.json",
    )
    download_floor_mbps: float = key(
        20.0,
        (
            "a model download slower than this (Mbit/s) for a whole window is the host's failure:"
            " it is destroyed and the next offer tried; 0 = no floor"
        ),
        env="MVP_DOWNLOAD_FLOOR_MBPS", flag="--download-floor-mbps", minimum=0,
    )
    download_floor_window_secs: float = key(
        90.0, "the window over which [model] download_floor_mbps is measured",
        env="MVP_DOWNLOAD_FLOOR_WINDOW_SECS", flag="--download-floor-window-secs", minimum=5,
    )
    max_context: int | None = key(
        None, "context length; unset = the engine's default", env="MVP_MAX_CONTEXT",
        flag="--max-context", minimum=16, example=4096,
    )
    parallel: int | None = key(
        None,
        (
            "requests llama-server serves at once (its slots, -np), each with the whole "
            "max_context (the fit counts KV cache for every slot); unset = as many as fit the "
            "node's memory, at most 4. llama-cpp-python's server serves one at a time"
        ),
        env="MVP_PARALLEL", flag="--parallel", minimum=1, maximum=64, example=4,
    )
    allow_partial_offload: bool = key(
        False,
        (
            "on a node with GPUs, serve even when llama-server's load log shows fewer layers on "
            "the GPU than asked, or no CUDA device (a warning); false = that host fails and the "
            "next offer is tried"
        ),
        env="MVP_ALLOW_PARTIAL_OFFLOAD", flag="--allow-partial-offload",
    )
