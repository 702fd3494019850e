"""[fifth]: the fifth marketplace's account (read only when it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class FifthSection(Section):
    """[fifth]: the Fifth Cloud account and where it rents."""

    NAME: ClassVar[str] = "fifth"
    SCOPE: ClassVar[str] = "fifth"

    api_key: str | None = key(
        None, "Fifth Cloud API key (secret)", env="MVP_FIFTH_API_KEY", flag="--fifth-api-key",
        secret=True, example="your-fifth-api-key",
    )
    region: str = key("eu-1", "where Fifth Cloud rents", env="MVP_FIFTH_REGION",
                      flag="--fifth-region")
