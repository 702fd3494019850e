"""Layered configuration: built-in defaults → TOML file → environment → CLI flags."""

from mvp_tui.config.loader import Config, ConfigPaths, load_config
from mvp_tui.config.values import ConfigError, Source

__all__ = ["Config", "ConfigError", "ConfigPaths", "Source", "load_config"]
