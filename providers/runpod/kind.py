"""RunPod as the app asks about it (providers/kind.py)."""

from __future__ import annotations

from mvp_tui.providers.kind import ProviderKind
from mvp_tui.providers.runpod.section import RunpodSection

KIND = ProviderKind(
    name="runpod",
    title="RunPod",
    build="mvp_tui.providers.runpod.client:build",
    section=RunpodSection,
    rented=True,
    api_key_env="RUNPOD_API_KEY",
    key_page="runpod.io → Settings → API Keys",
    key_url="https://www.runpod.io/console/user/settings",
    api_key_key="runpod.api_key",
    api_key_file_key="runpod.api_key_file",
    ssh_identity_key="runpod.ssh_identity",
    api_url_key="runpod.api_url",
    poll_key="runpod.poll_interval_secs",
    lease_noun="pod",
    seed_name="RunPod",
    filters_hint="[runpod] gpu_types, min_vram_gb or cloud (a type out of stock is skipped)",
    offer_spans_hosts=True,
    # Cloudflare's "error code: 1010" (a blocked client, not a refused key).
    blocked_marker="error code 1010",
)
