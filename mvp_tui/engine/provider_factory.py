"""The provider a configuration selects, built by its kind's factory with its settings and
secrets (providers/<name>/kind.py names it; the client is imported only here, when first
built, so a command that builds none loads no HTTP or Docker library)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.providers import registry
from mvp_tui.providers.base import Provider
from mvp_tui.providers.local.node import LineHandler


def build_provider(config: Config, *, on_line: LineHandler | None = None) -> Provider:
    """A ready provider client; a `ConfigError` (exit 2) when something it needs is missing."""
    kind = registry.find(config.provider)
    if kind is None:
        raise ConfigError(
            f"[provider] kind = {config.provider!r} (from {config.sources['provider.kind']}) "
            f"is not supported yet; use one of: {', '.join(registry.PROVIDERS)}"
        )
    if kind.api_key_key and not config.values.get(kind.api_key_key):
        # Said before the client (and its HTTP library) loads: the board asks every provider.
        spec = BY_DOTTED[kind.api_key_key]
        raise ConfigError(
            f"{spec.label} is required when provider={kind.name}; set {kind.api_key_env} (or "
            f"{spec.env[0]}, or {spec.label} in the config file). Get a key at {kind.key_url}"
        )
    module, function = kind.entry
    factory = cast(Callable[..., Any], getattr(importlib.import_module(module), function))
    return cast(Provider, factory(config, on_line))
