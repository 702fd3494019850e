"""[docker]: the node container of provider docker (read only when it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class DockerSection(Section):
    """[docker]: provider docker's node container."""

    NAME: ClassVar[str] = "docker"
    SCOPE: ClassVar[str] = "docker"

    gpus: str = key(
        "all", "GPUs given to the node container (docker --gpus)", env="MVP_DOCKER_GPUS",
        flag="--gpus",
    )
    cached_model_host_path: Path | None = key(
        None, "host GGUF mounted into the container (provider docker only)",
        env="MVP_CACHED_MODEL_HOST_PATH", flag="--cached-model-host-path",
        example="~/models/llama.gguf",
    )
    image: str | None = key(
        None,
        (
            "node image for provider docker (must hold python3 and an engine); unset = [image] "
            "node"
        ),
        env="MVP_DOCKER_IMAGE", flag="--docker-image", example="mvp-node:latest",
    )
    network: str = key(
        "bridge",
        (
            "how the engine port reaches mvp-tui: bridge publishes it on 127.0.0.1 (random port),"
            " host shares this machine's network"
        ),
        env="MVP_DOCKER_NETWORK", flag="--docker-network", choices=("bridge", "host"),
    )
