"""[runtime], [provider] and [image]: who this run and node are, who leases it, its image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.defaults import (
    DEFAULT_IMAGE,
    PROFILES,
    RENTED_IMAGE,
    RENTED_IMAGE_CUDA_MIN,
    WHOLE_MODEL,
)
from mvp_tui.config.spec import Kind, Section, key
from mvp_tui.providers.registry import PROVIDERS


@dataclass(frozen=True)
class RuntimeSection(Section):
    """[runtime]: this run and node's identity, how many nodes, where the agent lives."""

    NAME: ClassVar[str] = "runtime"

    profile: str = key(
        "local", "local leases this machine; deploy rents a GPU", env="MVP_RUNTIME_CONFIG",
        flag="--runtime-config", choices=PROFILES,
    )
    run_id: str | None = key(
        None,
        "run id; unset = a new unique id per run (a seed config's number, e.g. 41, works too)",
        env="MVP_RUN_ID", flag="--run-id", kind=Kind.RUN_ID, example="r-demo",
    )
    node_id: int = key(
        1, "logical node id (labels, channels)", env="MVP_LOGICAL_NODE_ID", flag="--node-id",
        minimum=1,
    )
    stage_index: int = key(
        0, "pipeline stage served by this node", env="MVP_STAGE_INDEX", flag="--stage-index",
        minimum=0, inert=WHOLE_MODEL,
    )
    layer_end_exclusive: int = key(
        16, "last layer (exclusive) of this stage", env="MVP_LAYER_END_EXCLUSIVE",
        flag="--layer-end-exclusive", minimum=1, inert=WHOLE_MODEL,
    )
    nodes: int = key(
        1, "nodes serving one model together: a main node and workers (llama.cpp RPC)",
        env="MVP_NODES", flag="--nodes", minimum=1, maximum=8,
    )
    local_rpc_unauthenticated: bool = key(
        False,
        (
            "let nodes > 1 run on provider local: its workers' ggml-rpc-server listens on this "
            "machine's loopback with NO authentication, so any local user can read and write that"
            " process's memory (rented nodes are the safe mode)"
        ),
        env="MVP_LOCAL_RPC_UNAUTHENTICATED", flag="--local-rpc-unauthenticated",
    )
    node_stages: tuple[str, ...] = key(
        (),
        (
            "each node's stage as stage_index:layer_end_exclusive, main node first; empty = split"
            " by the workers' memory"
        ),
        env="MVP_NODE_STAGES", flag="--node-stages", example=("0:6", "1:8"),
    )
    node_python: str = key(
        "python3", "Python interpreter that runs the node agent on the node",
        env="MVP_NODE_PYTHON", flag="--node-python",
    )
    node_dir: str = key(
        "/tmp/mvp-node",
        (
            "directory on the node for the agent, its logs and env file (one subdirectory per "
            "run)"
        ),
        env="MVP_NODE_DIR", flag="--node-dir",
    )


@dataclass(frozen=True)
class ProviderSection(Section):
    """[provider]: who leases the node (unset: the profile's choice)."""

    NAME: ClassVar[str] = "provider"

    kind: str | None = key(
        None, "provider; unset = chosen by the profile", env=("MVP_NODE_PROVIDER", "MVP_PROVIDER"),
        flag="--provider", choices=PROVIDERS, example="vastai",
    )


@dataclass(frozen=True)
class ImageSection(Section):
    """[image]: the node's container image and its download size."""

    NAME: ClassVar[str] = "image"

    node: str = key(
        DEFAULT_IMAGE,
        "container image of the node; unset on vastai/runpod = " + RENTED_IMAGE,
        env="MVP_NODE_IMAGE", flag="--image",
    )
    size_gb: float = key(
        0.0,
        (
            "the node image's download size in GB: Vast bills image pulls per GB, so the board's "
            "$/h (the first hour's) counts it in; 0 = not counted"
        ),
        env="MVP_IMAGE_SIZE_GB", flag="--image-size-gb", minimum=0, example=6.5,
    )
    cuda_min: str | None = key(
        None,
        (
            "the node image's CUDA floor, as major.minor: hosts whose driver supports less are "
            "never rented (Vast: cuda_max_good, RunPod: minCudaVersion unless [runpod] "
            f"min_cuda_version is set); unset = {RENTED_IMAGE_CUDA_MIN}, the floor of the "
            f"default image {RENTED_IMAGE}; 0 = no floor"
        ),
        env="MVP_IMAGE_CUDA_MIN", flag="--image-cuda-min", example="12.4",
    )
