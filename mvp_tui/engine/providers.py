"""The provider a configuration selects, built with its settings and secrets."""

from __future__ import annotations

from mvp_tui.config import Config, ConfigError
from mvp_tui.providers.base import Provider
from mvp_tui.providers.local import LocalProvider
from mvp_tui.providers.local_node import LineHandler
from mvp_tui.providers.vastai import VastAiProvider

SUPPORTED = ("local", "vastai")


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
        return VastAiProvider(
            api_key=api_key,
            api_url=config.get_str("vastai.api_url") or "https://console.vast.ai",
            ssh_user=config.get_str("vastai.ssh_user") or "root",
        )
    raise ConfigError(
        f"[provider] kind = {kind!r} (from {config.sources['provider.kind']}) is not supported "
        f"yet; use one of: {', '.join(SUPPORTED)}"
    )
