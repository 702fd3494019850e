"""Provider local as the app asks about it (providers/kind.py)."""

from __future__ import annotations

from mvp_tui.providers.kind import ProviderKind

KIND = ProviderKind(
    name="local",
    title="local",
    build="mvp_tui.providers.local.client:build",
    on_this_machine=True,
    child_process=True,
)
