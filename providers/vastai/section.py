"""[vastai]: the Vast.ai account, offer filter and instance (read only when it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class VastaiSection(Section):
    """[vastai]: the Vast.ai account, offer filter and instance."""

    NAME: ClassVar[str] = "vastai"
    SCOPE: ClassVar[str] = "vastai"

    api_key: str | None = key(
        None, "Vast.ai API key (secret)",
        env=("MVP_VASTAI_API_KEY", "VASTAI_API_KEY", "VAST_API_KEY"), flag="--vastai-api-key",
        secret=True, example="your-vast-api-key",
    )
    api_key_file: Path | None = key(
        None,
        (
            "file holding the Vast.ai API key (keeps it out of ps and shell history); used unless"
            " api_key is set in the same or a later layer"
        ),
        env=("MVP_VASTAI_API_KEY_FILE", "VASTAI_API_KEY_FILE"), flag="--vastai-api-key-file",
        example="~/.config/mvp-tui/vastai.key",
    )
    api_url: str = key(
        "https://console.vast.ai", "Vast.ai API base URL", env=("MVP_VASTAI_API_URL", "VAST_URL"),
        flag="--vastai-api-url",
    )
    image: str | None = key(
        None, "node image on Vast.ai; unset = [image] node", env="MVP_VASTAI_IMAGE",
        flag="--vastai-image", example="ghcr.io/example/mvp-node:latest",
    )
    bootstrap_command: str | None = key(
        None,
        (
            "command run over SSH on the node once the node agent is set up and started (in its "
            "run directory, with its environment); a non-zero exit fails the bring-up"
        ),
        env="MVP_VASTAI_BOOTSTRAP_COMMAND", flag="--vastai-bootstrap-command",
        example="nvidia-smi > gpu.txt",
    )
    disk_gb: int = key(
        50, "disk size in GB", env="MVP_VASTAI_DISK_GB", flag="--vastai-disk-gb", minimum=8,
    )
    ssh_user: str = key(
        "root", "SSH user on the node", env="MVP_VASTAI_SSH_USER", flag="--vastai-ssh-user",
    )
    pin_host_key: bool = key(
        True,
        (
            "make each instance's SSH host key here and pin it before create (its onstart "
            "installs it); false: the first connection trusts the key that answers"
        ),
        env="MVP_VASTAI_PIN_HOST_KEY", flag="--vastai-pin-host-key",
    )
    confirm_lease: bool = key(
        True,
        (
            "ask before renting: the dashboard asks unless this is false; headless runs need "
            "--yes unless this is false"
        ),
        env="MVP_VASTAI_CONFIRM_LEASE", flag="--vastai-confirm-lease",
    )
    onstart: str | None = key(
        None,
        (
            "onstart script run by Vast.ai after mvp-tui's boot guard (not the bootstrap); with "
            "the guard it must fit Vast's 4096 characters (about 2,000 left)"
        ),
        env="MVP_VASTAI_ONSTART", flag="--vastai-onstart", example="echo started > /tmp/onstart",
    )
    ssh_identity: Path = key(
        "~/.ssh/id_ed25519", "SSH private key for nodes", env="MVP_VASTAI_SSH_IDENTITY",
        flag="--vastai-ssh-identity",
    )
    gpu_name: str | None = key(
        None, "GPU model, e.g. RTX 4090; unset = any", env="MVP_VASTAI_GPU_NAME",
        flag="--vastai-gpu-name", example="RTX 4090",
    )
    min_gpu_ram_mb: int | None = key(
        None, "minimum VRAM per GPU in MB", env="MVP_VASTAI_MIN_GPU_RAM_MB",
        flag="--vastai-min-gpu-ram-mb", minimum=0, example=24000,
    )
    min_down_mbps: float = key(
        100.0, "minimum download bandwidth, Mbit/s", env="MVP_VASTAI_MIN_DOWN_MBPS",
        flag="--vastai-min-down-mbps", minimum=0,
    )
    min_up_mbps: float | None = key(
        None, "minimum upload bandwidth, Mbit/s", env="MVP_VASTAI_MIN_UP_MBPS",
        flag="--vastai-min-up-mbps", minimum=0, example=100.0,
    )
    min_reliability: float = key(
        0.95, "minimum host reliability, 0 to 1", env="MVP_VASTAI_MIN_RELIABILITY",
        flag="--vastai-min-reliability", minimum=0, maximum=1,
    )
    require_verified: bool = key(
        True, "only verified hosts", env="MVP_VASTAI_REQUIRE_VERIFIED",
        flag="--vastai-require-verified",
    )
    rental: str = key(
        "on-demand",
        (
            "on-demand, or bid: interruptible instances at min_bid × bid_factor, capped by "
            "max_price_per_hour of [limits]; an outbid pauses the instance and the run moves "
            "to another host"
        ),
        env="MVP_VASTAI_RENTAL", flag="--vastai-rental", choices=("on-demand", "bid"),
    )
    bid_factor: float = key(
        1.0,
        "the bid as a multiple of each offer's min_bid (higher: outbid less often)",
        env="MVP_VASTAI_BID_FACTOR", flag="--vastai-bid-factor", minimum=1, maximum=10,
    )
    poll_interval_secs: int = key(
        5, "seconds between instance status polls", env="MVP_VASTAI_POLL_INTERVAL_SECS",
        flag="--vastai-poll-interval-secs", minimum=1,
    )
