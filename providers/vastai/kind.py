"""Vast.ai as the app asks about it (providers/kind.py)."""

from __future__ import annotations

from mvp_tui.providers.kind import ProviderKind
from mvp_tui.providers.vastai.section import VastaiSection

KIND = ProviderKind(
    name="vastai",
    title="Vast.ai",
    build="mvp_tui.providers.vastai.client:build",
    section=VastaiSection,
    rented=True,
    api_key_env="VASTAI_API_KEY",
    key_page="console.vast.ai → Keys",
    key_url="https://cloud.vast.ai/account/",
    api_key_key="vastai.api_key",
    api_key_file_key="vastai.api_key_file",
    ssh_identity_key="vastai.ssh_identity",
    api_url_key="vastai.api_url",
    confirm_key="vastai.confirm_lease",
    image_key="vastai.image",
    poll_key="vastai.poll_interval_secs",
    seed_name="VastAI",
    filters_hint="the [vastai] filters (gpu_name, min_gpu_ram_mb, …)",
)
