"""The provider a configuration selects, built with its settings and secrets."""

from __future__ import annotations

import re

from mvp_tui.config import Config, ConfigError
from mvp_tui.providers.base import Provider
from mvp_tui.providers.local import LocalProvider
from mvp_tui.providers.local_node import LineHandler

SUPPORTED = ("local", "docker", "vastai", "runpod")


def build_provider(config: Config, *, on_line: LineHandler | None = None) -> Provider:
    """A ready provider client; a `ConfigError` (exit 2) when something it needs is missing."""
    kind = config.provider
    if kind == "local":
        return LocalProvider(on_line=on_line)
    if kind == "vastai":
        api_key = config.get_str("vastai.api_key")
        if not api_key:
            raise ConfigError(
                "[vastai] api_key is required when provider=vastai; set VASTAI_API_KEY (or "
                "MVP_VASTAI_API_KEY, or [vastai] api_key in the config file). Get a key at "
                "https://cloud.vast.ai/account/"
            )
        from mvp_tui.providers.vastai import VastAiProvider  # httpx loads when first used

        return VastAiProvider(
            api_key=api_key,
            api_url=config.require_str("vastai.api_url"),
            ssh_user=config.require_str("vastai.ssh_user"),
            image_gb=config.get_float("image.size_gb") or 0.0,
            pin_host_key=config.get_bool("vastai.pin_host_key"),
        )
    if kind == "runpod":
        return _runpod(config)
    if kind == "docker":
        from mvp_tui.providers.docker import DockerProvider, settings_from_config

        return DockerProvider(settings_from_config(config), on_line=on_line)
    raise ConfigError(
        f"[provider] kind = {kind!r} (from {config.sources['provider.kind']}) is not supported "
        f"yet; use one of: {', '.join(SUPPORTED)}"
    )


def _runpod(config: Config) -> Provider:
    api_key = config.get_str("runpod.api_key")
    if not api_key:
        raise ConfigError(
            "[runpod] api_key is required when provider=runpod; set RUNPOD_API_KEY (or "
            "MVP_RUNPOD_API_KEY, or [runpod] api_key in the config file). Get a key at "
            "https://www.runpod.io/console/user/settings"
        )
    # httpx loads with the provider, only once there is a key to use it with.
    from mvp_tui.providers.base import ProviderError
    from mvp_tui.providers.runpod import (
        DEFAULT_API_URL,
        DEFAULT_MIN_CUDA_VERSION,
        RunPodProvider,
        RunPodSettings,
    )

    cuda = config.get_str("runpod.min_cuda_version")
    if cuda is not None and not re.fullmatch(r"\d+\.\d+", cuda):
        raise ConfigError(
            f"[runpod] min_cuda_version = {cuda!r} (from "
            f"{config.sources.get('runpod.min_cuda_version')}) is not valid: expected "
            "major.minor, e.g. 12.4"
        )
    settings = RunPodSettings(
        gpu_types=tuple(t for t in config.get_list("runpod.gpu_types") if t.strip()),
        cloud=config.get_str("runpod.cloud") or "SECURE",
        gpu_count=config.get_int("runpod.gpu_count") or 1,
        min_vram_gb=config.get_int("runpod.min_vram_gb") or 0,
        container_disk_gb=config.get_int("runpod.container_disk_gb") or 50,
        min_cuda_version=cuda or DEFAULT_MIN_CUDA_VERSION,
    )
    try:
        return RunPodProvider(
            api_key=api_key,
            api_url=config.get_str("runpod.api_url") or DEFAULT_API_URL,
            settings=settings,
        )
    except ProviderError as exc:
        raise ConfigError(str(exc)) from None
