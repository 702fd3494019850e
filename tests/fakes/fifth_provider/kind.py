"""Fifth Cloud as the app asks about it (providers/kind.py)."""

from __future__ import annotations

from mvp_tui.providers.kind import ProviderKind
from tests.fakes.fifth_provider.section import FifthSection

KIND = ProviderKind(
    name="fifth",
    title="Fifth Cloud",
    build="tests.fakes.fifth_provider.client:build",
    section=FifthSection,
    rented=True,
    api_key_env="MVP_FIFTH_API_KEY",
    api_key_key="fifth.api_key",
    key_page="fifth.example → Keys",
    key_url="https://fifth.example/keys",
)
