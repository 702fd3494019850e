"""Benchmark: parse + normalise a Vast.ai offer search answer of 10,000 offers.

Builds a bundles answer with FakeVast's realistic offer rows (varied prices, GPUs, places,
a few malformed rows), then times three things, each the median of --runs:
  - normalise: `read_offers` on the already-decoded JSON (policy re-check included);
  - parse+normalise: `json.loads` of the raw body, then `read_offers`;
  - search_offers: the provider end to end over an in-process httpx transport.
Prints milliseconds, microseconds per offer, and the peak Python memory of one parse.

    .venv/bin/python bench/bench_vast_offers.py [--offers 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.smoke import add_smoke
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.providers.vastai.offers import read_offers
from tests.fakes.vastai_server import _default_offer

GPUS = ["RTX 4090", "RTX 3090", "A100 PCIE", "H100 SXM", "RTX A6000", "L40S"]
PLACES = ["Texas, US", "Quebec, CA", "Bavaria, DE", "Tokyo, JP", "Ohio, US"]
POLICY = SelectionPolicy(require_verified=False, max_price_per_hour=5.0, limit=10_000)


def answer_body(count: int) -> bytes:
    rng = random.Random(7)
    rows: list[Any] = []
    for n in range(count):
        row = _default_offer(100_000 + n)
        row.update(
            gpu_name=rng.choice(GPUS),
            geolocation=rng.choice(PLACES),
            dph_total=round(rng.uniform(0.1, 6.0), 4),
            num_gpus=rng.choice([1, 1, 1, 2, 4, 8]),
            reliability2=round(rng.uniform(0.8, 1.0), 4),
        )
        rows.append(row)
    for n in range(0, count, 500):  # a few bad rows, as real answers have
        rows[n] = {"id": rows[n]["id"], "gpu_name": "RTX 4090", "num_gpus": 1}
    return json.dumps({"offers": rows}).encode()


def median_ms(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def search_ms(body: bytes, runs: int) -> tuple[float, int]:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    provider = VastAiProvider(
        api_key="bench-key-0123456789",
        api_url="https://vast.invalid",
        transport=httpx.MockTransport(answer),
    )
    times = []
    found = 0
    try:
        for _ in range(runs):
            started = time.perf_counter()
            found = len(await provider.search_offers(POLICY))
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await provider.aclose()
    return statistics.median(times), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.offers, args.runs = 200, 1

    body = answer_body(args.offers)
    decoded = json.loads(body)
    page = read_offers(decoded, POLICY)
    kept, skipped = len(page.offers), len(page.skipped)

    normalise = median_ms(lambda: read_offers(decoded, POLICY), args.runs)
    parse = median_ms(lambda: read_offers(json.loads(body), POLICY), args.runs)
    search, found = asyncio.run(search_ms(body, args.runs))
    assert found == kept

    tracemalloc.start()
    read_offers(json.loads(body), POLICY)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    per = 1000 / args.offers
    print(
        f"offers: {args.offers} rows, {len(body) / 1e6:.1f} MB body; kept {kept}, skipped {skipped}"
    )
    print(f"normalise        {normalise:8.1f} ms   {normalise * per:6.1f} µs/offer")
    print(f"parse+normalise  {parse:8.1f} ms   {parse * per:6.1f} µs/offer")
    print(
        f"search_offers    {search:8.1f} ms   {search * per:6.1f} µs/offer (in-process transport)"
    )
    print(f"peak memory (parse+normalise): {peak / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
