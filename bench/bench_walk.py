"""The lease walk's own overhead: a 5-offer walk against a zero-latency FakeVast.

The first four offers fail (gone 404, forbidden 403, gone 410, gone 404)
and the fifth runs at once. Provider calls are timed through a thin proxy, so the figures
split the wall time into HTTP round trips to the fake and the walk's own work (records
written with fsync, events, classification). The fake scripts no delays, so "wall minus
scripted delays" is the wall time itself. Target: walk overhead < 50 ms.

Run: .venv/bin/python bench/bench_walk.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke  # noqa: E402
from bench.timed_provider import TimedProvider  # noqa: E402
from mvp_tui.events import RecordingSink  # noqa: E402
from mvp_tui.lease import LeaseWalk, RecordStore, RunRecord, WalkSettings  # noqa: E402
from mvp_tui.providers.base import Offer, SelectionPolicy  # noqa: E402
from mvp_tui.providers.vastai.client import VastAiProvider  # noqa: E402
from tests.fakes.vastai_server import FakeVast, Fault  # noqa: E402


class TimedStore(RecordStore):
    """A RecordStore that adds up the time of its durable (fsynced) writes."""

    spent_s = 0.0
    writes = 0

    def save(self, record: RunRecord) -> None:
        started = time.perf_counter()
        super().save(record)
        TimedStore.spent_s += time.perf_counter() - started
        TimedStore.writes += 1


async def one_run(state_dir: Path) -> tuple[float, float, int]:
    """(wall s, provider s, provider calls) of one walk."""
    with FakeVast(loading_polls=0) as fake:
        prices = [0.30, 0.31, 0.32, 0.33, 0.34]
        ids = [fake.add_offer(dph_total=p) for p in prices]
        provider = VastAiProvider(api_key=fake.api_key, api_url=fake.url)
        try:
            offers: list[Offer] = await provider.search_offers(SelectionPolicy())
            # Creates 1-4: gone (404 no_such_ask), forbidden (403), gone (410), gone (404).
            fake.script("create", *(Fault(status=s) for s in (404, 403, 410, 404)))
            timed = TimedProvider(provider)
            settings = WalkSettings(poll_interval_s=0.5, image="ghcr.io/example/node:1")
            walk = LeaseWalk(timed, TimedStore(state_dir), RecordingSink(), settings)  # type: ignore[arg-type]
            started = time.perf_counter()
            result = await walk.run(offers)
            wall = time.perf_counter() - started
            if not result.ok or result.lease is None or result.lease.offer_id != str(ids[4]):
                raise SystemExit(f"bench walk did not end on the 5th offer: {result.reason}")
            return wall, timed.spent_s, timed.calls
        finally:
            await provider.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    walls, overheads, saves = [], [], []
    calls = writes = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.runs + 1):
            TimedStore.spent_s, TimedStore.writes = 0.0, 0
            wall, provider_s, calls = asyncio.run(one_run(Path(tmp) / f"s{n}"))
            if n == 0:
                continue  # warm-up: imports, first connection
            walls.append(wall * 1000)
            overheads.append((wall - provider_s) * 1000)
            saves.append(TimedStore.spent_s * 1000)
            writes = TimedStore.writes
    p95 = statistics.quantiles(overheads, n=20)[-1] if len(overheads) >= 2 else overheads[0]
    print(f"lease walk, 5 offers (4 refused, 5th runs), {args.runs} runs, {calls} provider calls")
    print(f"  wall (scripted fake delays: 0 ms)  median {statistics.median(walls):7.2f} ms")
    print(
        f"  walk overhead (wall - provider)    median {statistics.median(overheads):7.2f} ms"
        f"   p95 {p95:7.2f} ms   target < 50 ms"
    )
    print(
        f"    of which {writes} durable record writes  median {statistics.median(saves):7.2f} ms"
        " (fsync: disk-bound)"
    )
    cpu = [o - w for o, w in zip(overheads, saves, strict=True)]
    print(f"    walk overhead without the writes   median {statistics.median(cpu):7.2f} ms")


if __name__ == "__main__":
    main()
