"""How many requests the engine serves at once (llama-server's slots, `-np`), from the run's
`[model] parallel` (`MVP_PARALLEL`) and the fit the app read (`MVP_VRAM_NEED_MIB`, which counts
one slot's KV cache when the key is unset, and `MVP_KV_SLOT_MIB`, one slot's cache).

Unset, the node adds slots while its memory (the GPUs' VRAM, or without GPUs the host's
available RAM, where llama.cpp then serves from) holds them past the need, up to
`AUTO_MOST_SLOTS`: each slot gets its own cache of the whole context, so llama-server gets
`-c` context × slots (it splits `-c` over its slots). An unknown fit gets one slot.
llama-cpp-python's server serves one request at a time whatever it is asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AUTO_MOST_SLOTS = 4
# Each extra slot's cache also grows llama.cpp's compute buffers a little: the app's fit adds
# 5% of what it counts as margin (mvp_tui/engine/model_fit.py MARGIN_FRACTION), so does this.
SLOT_MARGIN_FRACTION = 0.05
MEMINFO = Path("/proc/meminfo")
ONE_AT_A_TIME = "llama-cpp-python"  # the engine kind whose server serves one request at once


@dataclass(frozen=True)  # no slots=: nodes run Python 3.8
class SlotPlan:
    """The slots asked of the engine, and why, in words (the engine phase's detail)."""

    slots: int
    why: str


def slot_plan(
    *, kind: str, parallel: int, memory_mib: int, need_mib: int, kv_slot_mib: int
) -> SlotPlan:
    """The slots for an engine of `kind` on a node with `memory_mib` to serve from."""
    if kind == ONE_AT_A_TIME:
        return SlotPlan(1, "llama-cpp-python's server serves one request at a time")
    if parallel > 0:
        return SlotPlan(parallel, f"[model] parallel = {parallel}")
    if not (memory_mib > 0 and need_mib > 0 and kv_slot_mib > 0):
        return SlotPlan(1, "the fit is unknown: one slot")
    if memory_mib < need_mib:
        return SlotPlan(1, f"{need_mib:,} MiB needed > {memory_mib:,} MiB: one slot")
    per_slot = math.ceil(kv_slot_mib * (1 + SLOT_MARGIN_FRACTION))
    slots = min(AUTO_MOST_SLOTS, 1 + (memory_mib - need_mib) // per_slot)
    return SlotPlan(
        slots,
        f"{slots} slot{'s' if slots > 1 else ''} of {kv_slot_mib:,} MiB KV cache: "
        f"{need_mib:,} MiB needed for one, {memory_mib:,} MiB to serve from "
        f"(at most {AUTO_MOST_SLOTS} unless [model] parallel says)",
    )


def node_memory_mib(gpus: list[dict[str, Any]], meminfo: Path | None = None) -> int:
    """What the engine serves from: the GPUs' VRAM, else the host's available RAM (0 when
    it cannot be read)."""
    if gpus:
        return sum(int(g.get("memory_mib") or 0) for g in gpus)
    try:
        text = (meminfo or MEMINFO).read_text(encoding="ascii", errors="replace")
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemAvailable":
            fields = rest.split()
            return int(fields[0]) // 1024 if fields and fields[0].isdigit() else 0
    return 0
