"""An offer search's VRAM floor from the run's own need (seed 003 `vram_floor_gb`, audit row
116): before a provider that takes one (RunPod `auto` with no `min_vram_gb`) searches, the
model's need per node (the board's fit: weights, KV cache at `[model] max_context`, margin)
becomes its floor, so no GPU too small for the run is created, headless or not. A need that
cannot be read leaves the provider's fallback floor, and the line says so and why."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.providers.base import Provider, VramNeedUser
from mvp_tui.untrusted import clean_line

# The need's read is bounded on its own: an offer search never waits longer on the hub.
NEED_TIMEOUT_S = 15.0


async def floor_from_need(
    provider: Provider, read_need: Callable[[], Awaitable[ModelNeed]]
) -> str | None:
    """Give `provider` the run's need as its floor; the line to log, None when the provider
    keeps a floor of its own (an explicit GPU list, the user's floor, no floor at all)."""
    if not isinstance(provider, VramNeedUser) or not provider.wants_vram_need:
        return None
    from mvp_tui.engine.model_need import ModelNeedError  # httpx: only when asked

    name = provider.info.name
    try:
        need = await asyncio.wait_for(read_need(), NEED_TIMEOUT_S)
    except (ModelNeedError, TimeoutError) as exc:
        why = clean_line(str(exc), 300) if isinstance(exc, ModelNeedError) else "no answer"
        floor = provider.use_vram_need(None)
        return (
            f"{name} auto: the model's VRAM need could not be read ({why}); GPUs of at "
            f"least {floor} GB are tried, and one too small fails as the model loads; set "
            f"{provider.vram_floor_key} to the model's need"
        )
    floor = provider.use_vram_need(need.per_node_bytes)
    return (
        f"{name} auto: GPUs of at least {floor} GB each, the run's own need (the model "
        f"{need.describe()}); {provider.vram_floor_key} sets another floor"
    )
