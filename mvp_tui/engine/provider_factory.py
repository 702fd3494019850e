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
        vast = config.settings.vastai
        api_key = vast.api_key if vast else None
        if vast is None or not api_key:
            raise ConfigError(
                "[vastai] api_key is required when provider=vastai; set VASTAI_API_KEY (or "
                "MVP_VASTAI_API_KEY, or [vastai] api_key in the config file). Get a key at "
                "https://cloud.vast.ai/account/"
            )
        from mvp_tui.providers.vastai import VastAiProvider  # httpx loads when first used

        return VastAiProvider(
            api_key=api_key,
            api_url=vast.api_url,
            ssh_user=vast.ssh_user,
            image_gb=config.settings.image.size_gb,
            pin_host_key=vast.pin_host_key,
            rental=vast.rental,
            bid_factor=vast.bid_factor,
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
    runpod = config.settings.runpod
    api_key = runpod.api_key if runpod else None
    if runpod is None or not api_key:
        raise ConfigError(
            "[runpod] api_key is required when provider=runpod; set RUNPOD_API_KEY (or "
            "MVP_RUNPOD_API_KEY, or [runpod] api_key in the config file). Get a key at "
            "https://www.runpod.io/console/user/settings"
        )
    if runpod.rental == "spot":
        raise ConfigError(
            f"[runpod] rental = \"spot\" (from {config.sources.get('runpod.rental')}): RunPod "
            "no longer offers spot pods (its API answers 500 \"Spot pods are no longer "
            "offered\"); set [runpod] rental = \"on-demand\", or rent interruptible on "
            "Vast.ai ([provider] kind = \"vastai\" with [vastai] rental = \"bid\")"
        )
    # httpx loads with the provider, only once there is a key to use it with.
    from mvp_tui.providers.base import ProviderError
    from mvp_tui.providers.runpod import RunPodProvider, RunPodSettings

    cuda = runpod.min_cuda_version
    if cuda is not None and not re.fullmatch(r"\d+\.\d+", cuda):
        raise ConfigError(
            f"[runpod] min_cuda_version = {cuda!r} (from "
            f"{config.sources.get('runpod.min_cuda_version')}) is not valid: expected "
            "major.minor, e.g. 12.4"
        )
    try:
        return RunPodProvider(
            api_key=api_key,
            api_url=runpod.api_url,
            settings=RunPodSettings.from_section(runpod, config.cuda_floor()),
        )
    except ProviderError as exc:
        raise ConfigError(str(exc)) from None
