"""[runpod]: the RunPod account, GPU types, pod and network volume (read only when it
runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config.defaults import RENTED_IMAGE_CUDA_MIN
from mvp_tui.config.spec import Section, key

# The host driver's CUDA floor sent on every create (and catalog read) when neither
# min_cuda_version nor [image] cuda_min is set: the default image's own floor (its base is
# CUDA 12.8.1; a pod placed on an older driver fails only once the engine starts).
DEFAULT_MIN_CUDA_VERSION = RENTED_IMAGE_CUDA_MIN
# The auto walk's VRAM floor per GPU when min_vram_gb is unset and the model's need cannot
# be read (the hub does not answer): the floor before the need was used.
FALLBACK_MIN_VRAM_GB = 16


@dataclass(frozen=True)
class RunpodSection(Section):
    """[runpod]: the RunPod account, GPU types, pod and network volume."""

    NAME: ClassVar[str] = "runpod"
    SCOPE: ClassVar[str] = "runpod"

    api_key: str | None = key(
        None, "RunPod API key (secret)", env=("MVP_RUNPOD_API_KEY", "RUNPOD_API_KEY"),
        flag="--runpod-api-key", secret=True, example="your-runpod-api-key",
    )
    api_key_file: Path | None = key(
        None,
        (
            "file holding the RunPod API key (keeps it out of ps and shell history); used unless "
            "api_key is set in the same or a later layer"
        ),
        env=("MVP_RUNPOD_API_KEY_FILE", "RUNPOD_API_KEY_FILE"), flag="--runpod-api-key-file",
        example="~/.config/mvp-tui/runpod.key",
    )
    api_url: str = key(
        "https://api.runpod.io/v2", "RunPod REST v2 API base URL (v1 was retired on 2026-11-15)",
        env="MVP_RUNPOD_API_URL", flag="--runpod-api-url",
    )
    gpu_types: tuple[str, ...] = key(
        (),
        (
            "GPU type ids (or names) to rent; tried in the board's order (cheapest first); empty"
            " = auto: the types with at least min_vram_gb, cheapest first, out of stock skipped"
        ),
        env="MVP_RUNPOD_GPU_TYPES", flag="--runpod-gpu-types",
        example=("NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000"),
    )
    cloud: str = key(
        "SECURE", "which cloud to rent from", env="MVP_RUNPOD_CLOUD", flag="--runpod-cloud",
        choices=("SECURE", "COMMUNITY", "ALL"),
    )
    rental: str = key(
        "on-demand",
        (
            "on-demand only: RunPod no longer offers spot pods (its API answers 500 \"Spot "
            "pods are no longer offered\"); spot is refused with that reason"
        ),
        env="MVP_RUNPOD_RENTAL", flag="--runpod-rental", choices=("on-demand", "spot"),
    )
    container_disk_gb: int = key(
        50, "container disk in GB", env="MVP_RUNPOD_CONTAINER_DISK_GB",
        flag="--runpod-container-disk-gb", minimum=1,
    )
    min_vram_gb: int | None = key(
        None,
        (
            "VRAM floor per GPU in GB for gpu_types = auto; unset = the run's own need (the "
            f"model's fit at max_context, split over gpu_count), {FALLBACK_MIN_VRAM_GB} when the"
            " model's size cannot be read"
        ),
        env="MVP_RUNPOD_MIN_VRAM_GB", flag="--runpod-min-vram-gb", minimum=0, example=24,
    )
    gpu_count: int = key(
        1, "GPUs per pod", env="MVP_RUNPOD_GPU_COUNT", flag="--runpod-gpu-count", minimum=1,
    )
    min_cuda_version: str | None = key(
        None,
        (
            "lowest CUDA version of the host, as major.minor (e.g. 12.4), over [image] "
            "cuda_min; unset = [image] cuda_min (itself unset = "
            f"{DEFAULT_MIN_CUDA_VERSION}, the default image's floor)"
        ),
        env="MVP_RUNPOD_MIN_CUDA_VERSION", flag="--runpod-min-cuda-version", example="12.4",
    )
    ssh_identity: Path = key(
        "~/.ssh/id_ed25519",
        (
            "SSH private key for pods (its public half is registered with the account and sent to"
            " the pod)"
        ),
        env="MVP_RUNPOD_SSH_IDENTITY", flag="--runpod-ssh-identity",
    )
    network_volume: str | None = key(
        None,
        (
            "a network volume (name or id) that holds the model cache, so a second run downloads "
            "nothing; created when missing; it bills per GB and month and only `mvp-tui volume "
            "delete` deletes it (never `down`); unset = none"
        ),
        env="MVP_RUNPOD_NETWORK_VOLUME", flag="--runpod-network-volume", example="mvp-models",
    )
    network_volume_gb: int = key(
        50, "size in GB of a network volume mvp-tui creates (10 to 4096)",
        env="MVP_RUNPOD_NETWORK_VOLUME_GB", minimum=10,
    )
    network_volume_data_center: str | None = key(
        None, "data center of a network volume mvp-tui creates (e.g. EU-RO-1); its pods run there",
        env="MVP_RUNPOD_NETWORK_VOLUME_DATA_CENTER", example="EU-RO-1",
    )
    network_volume_usd_per_gb_month: float = key(
        0.07,
        (
            "what a network volume costs per GB and month (RunPod's price under 1 TB; the API "
            "says none), for the spend line and `ls`"
        ),
        env="MVP_RUNPOD_NETWORK_VOLUME_USD_PER_GB_MONTH", minimum=0,
    )
    template_id: str | None = key(
        None,
        (
            "a RunPod pod template whose container start command is mvp-tui's boot command "
            "(`python -m mvp_tui.providers.runpod.boot` prints it): pods are created from it "
            "and the create sends no `args`; unset = the start command goes in `args` (see "
            "docs/providers/runpod.md, \"The start command\")"
        ),
        env="MVP_RUNPOD_TEMPLATE_ID", flag="--runpod-template-id", example="30zmvf89kd",
    )
    poll_interval_secs: float = key(
        5.0, "seconds between pod status polls while a pod comes up (overbrainer polls every 5 s)",
        env="MVP_RUNPOD_POLL_INTERVAL_SECS", flag="--runpod-poll-interval-secs", above=0,
    )
