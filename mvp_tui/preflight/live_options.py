"""`check --live`'s options and their defaults (light: `check --help` reads them without
loading the engine)."""

from __future__ import annotations

from dataclasses import dataclass

from mvp_tui.providers.registry import BOARD

LIVE_PROVIDERS = BOARD  # every provider on the board (their kinds, providers/registry.py)
DEFAULT_MAX_SPEND_USD = 0.10
DEFAULT_MAX_MINUTES = 30.0  # a small model's bring-up on a fresh host: minutes, not an hour


@dataclass(frozen=True, slots=True)
class LiveOptions:
    provider: str
    max_spend_usd: float = DEFAULT_MAX_SPEND_USD
    max_minutes: float = DEFAULT_MAX_MINUTES
    as_json: bool = False
