"""Layered configuration: built-in defaults → TOML file → environment → CLI flags.

The public names load on first use (PEP 562): a provider's section imports
`mvp_tui.config.spec` alone, and the loader (which reads the registry of providers, whose
kinds import those sections) comes only when `Config` or `load_config` is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvp_tui.lazy_names import lazy_names

if TYPE_CHECKING:
    from mvp_tui.config.loader import Config, ConfigPaths, load_config
    from mvp_tui.config.values import ConfigError, Source

_HOMES = {
    "Config": "mvp_tui.config.loader",
    "ConfigPaths": "mvp_tui.config.loader",
    "load_config": "mvp_tui.config.loader",
    "ConfigError": "mvp_tui.config.values",
    "Source": "mvp_tui.config.values",
}
__all__ = ["Config", "ConfigError", "ConfigPaths", "Source", "load_config"]

__getattr__ = lazy_names(__name__, _HOMES)
