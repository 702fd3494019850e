"""The palette's "Bench the served model": `mvp-tui bench` on the live run, from the dashboard.

The same measure-and-keep as the command (engine/load_bench.py): one stream, then
`[prompt] concurrency` streams (4 when it is 1), `PALETTE_LEVEL_S` each, against the run's
own endpoint; the levels go into the host journal, and the table comes back as text for a
dialog. No Textual here; the HTTP client loads on the first bench (the dashboard paints
before loading HTTP: tests/foundation/test_startup_imports.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mvp_tui.lease.endpoint_record import EndpointRecord

PALETTE_LEVEL_S = 10.0
LOADED_DEFAULT = 4  # the loaded level when [prompt] concurrency is 1


@dataclass(frozen=True, slots=True)
class BenchOutcome:
    """What the dialog shows: a title and the table (or why there is none)."""

    title: str
    text: str
    ok: bool


def palette_levels(concurrency: int) -> list[int]:
    return [1, concurrency if concurrency > 1 else LOADED_DEFAULT]


async def bench_live_run(endpoint: EndpointRecord, run_id: str, state_dir: Path,
                         concurrency: int, level_s: float = PALETTE_LEVEL_S) -> BenchOutcome:
    """Measure, journal, and the table; a failure is an outcome that says why."""
    from mvp_tui.engine.load_bench import keep, measure, render_table, served_on

    try:
        served = await asyncio.to_thread(served_on, state_dir, run_id)
    except OSError as exc:
        return BenchOutcome("bench", f"the host journal cannot be read: {exc}", False)
    if isinstance(served, str):
        return BenchOutcome("bench", served, False)
    results = await measure(endpoint, palette_levels(concurrency), level_s)
    try:
        kept = await asyncio.to_thread(keep, state_dir, run_id, served, results, time.time())
        note = (f"{len(kept)} level(s) kept in the host journal: the board's tok/s and $/Mtok "
                "use them" if kept else "no level got tokens: nothing was journaled")
    except OSError as exc:
        note = f"the host journal could not take the figures: {exc}"
    errors = [f"{r.concurrency} stream(s): {r.first_error}" for r in results if r.first_error]
    price = served.price_per_hour
    rate = "$/h not on record" if price is None else f"${price:.3f}/h"
    text = "\n".join([render_table(results, price).rstrip("\n"), "", note, *errors])
    return BenchOutcome(f"bench: {served.model} on {served.gpu_name} · {rate}", text,
                        bool(results) and all(r.tokens > 0 for r in results))
