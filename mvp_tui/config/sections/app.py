"""[observability], [ui], [offers] and [state]: this app's own archive, dashboard and
records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class ObservabilitySection(Section):
    """[observability]: the datastream archive."""

    NAME: ClassVar[str] = "observability"

    datastream_frame_log: Path | None = key(
        None, "archive every datastream frame to this JSONL file", env="MVP_DATASTREAM_FRAME_LOG",
        flag="--datastream-frame-log", example="~/mvp-frames.jsonl",
    )


@dataclass(frozen=True)
class UiSection(Section):
    """[ui]: the dashboard's theme and refresh."""

    NAME: ClassVar[str] = "ui"

    theme: str = key(
        "mvp-dark", "dashboard theme (mvp-dark, mvp-light, or any Textual theme)",
        env="MVP_UI_THEME", flag="--theme",
    )
    offers_refresh_secs: float = key(
        60.0, "the offer board re-reads prices and stock this often, in place (0 = never)",
        env="MVP_UI_OFFERS_REFRESH_SECS", flag="--offers-refresh-secs", minimum=0,
    )


@dataclass(frozen=True)
class OffersSection(Section):
    """[offers]: what the offer board lists."""

    NAME: ClassVar[str] = "offers"

    show_unfit: bool = key(
        True, "list offers whose VRAM cannot hold the model (dimmed, last); false = hide them",
        env="MVP_OFFERS_SHOW_UNFIT", flag="--show-unfit",
    )


@dataclass(frozen=True)
class StateSection(Section):
    """[state]: where run records live."""

    NAME: ClassVar[str] = "state"

    dir: Path | None = key(
        None, "where run records live; unset = the user state dir", env="MVP_STATE_DIR",
        flag="--state-dir", example="~/.local/state/mvp-tui",
    )
