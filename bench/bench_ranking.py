"""Benchmark: ranking 10,000 offers by $ per million tokens.

Varied offers (GPUs with their bandwidths, prices, places) and a host journal's learned
figures for a few GPU models and hosts; times, each the median of --runs:
  - outlooks: each offer's fit, ~ready and decode speed (`outlook_for`, prediction or the
    learned median) and the board model taking them (`OffersModel.set_outlook`);
  - re-rank: the above, then the board's order by `$/Mtok` (`view()`) and its column widths,
    of the offers already on the board (a model chosen, the journal read): what one repaint
    of a re-sorted board needs beyond the rows on screen;
  - refresh: what the board does with a search's answer (`[ui] offers_refresh_secs`), each
    run 10,000 offers it has not seen as objects (the same ids, new prices): the model takes
    the host memory, the outlook and the offers (entries, filter texts, sort values, each
    offer's outlook), then the order by `$/Mtok` and every column's width, as
    `OffersPane.update_offers` then `refresh_view` ask for them.
Target: re-rank and refresh < 50 ms CPU (the median) at 10,000 offers.

    .venv/bin/python bench/bench_ranking.py [--offers 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.smoke import add_smoke
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.outlook import Outlook, outlook_for
from mvp_tui.lease.host_journal import HostOutcome, SpeedSample, memory_from
from mvp_tui.providers.base import Offer
from mvp_tui.providers.gpu_bandwidth import bandwidth_gbps
from mvp_tui.tui.offer_board import BoardResult
from mvp_tui.widgets.offers_model import OffersModel, SortKey

GPUS = ["RTX 4090", "RTX 3090", "A100 SXM4", "H100 PCIE", "RTX A6000", "L40S", "RTX 5090"]
PLACES = ["Texas, US", "Quebec, CA", "Bavaria, DE", "Tokyo, JP", "Ohio, US"]
MODEL = "llama-3.1-8b-q4_k_m.gguf"
NOW = 1_780_000_000.0


def offers(count: int, seed: int = 7) -> list[Offer]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        gpu = rng.choice(GPUS)
        out.append(Offer(
            provider="vastai", offer_id=str(100_000 + n), gpu_name=gpu,
            num_gpus=rng.choice([1, 1, 1, 2, 4]), gpu_ram_mib=24564,
            price_per_hour=round(rng.uniform(0.1, 4.0), 4), reliability=0.99,
            down_mbps=rng.uniform(100, 3000), up_mbps=500.0, location=rng.choice(PLACES),
            machine_id=str(40_000 + n % 3000), mem_bw_gbps=bandwidth_gbps(gpu)))
    return out


def history() -> tuple[list[HostOutcome], list[SpeedSample]]:
    """A month of this user's runs: 60 served attempts and 600 answers on a few hosts."""
    rng = random.Random(3)
    runs, speeds = [], []
    for n in range(60):
        gpu, host = GPUS[n % 3], str(40_000 + n)
        runs.append(HostOutcome(at=NOW - n * 3600, run_id=f"r-{n}", provider="vastai",
                                host=host, offer_id=str(n), gpu_name=gpu, stage="serving",
                                ok=True, reason="", image="img", model=MODEL,
                                stage_secs={"create": 1.0, "running": rng.uniform(20, 200)}))
        speeds += [SpeedSample(at=NOW - n * 3600 + i, run_id=f"r-{n}", provider="vastai",
                               host=host, gpu_name=gpu, model=MODEL,
                               decode_tok_s=rng.uniform(80, 150), ttft_ms=40.0)
                   for i in range(10)]
    return runs, speeds


def refresh_board(model: OffersModel, result: BoardResult, outlook: Outlook) -> None:
    """What `OffersPane.update_offers` asks of its model for one search's answer."""
    model.update_offers(result.offers, providers=result.answered,
                        failures=result.failure_text, outlook=outlook, show_unfit=True)


def median_ms(run: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median wall and CPU milliseconds, and the least CPU: on a shared, loaded machine the
    wall clock counts the time other processes held the core; this process's CPU time does
    not, but a core shared with a neighbour still runs slower (see `calibration`), and the
    least of the runs is the one least disturbed (timeit's reading)."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus), min(cpus)


def calibration(runs: int) -> tuple[float, float]:
    """A fixed pure-Python loop's median and least CPU ms, timed beside the ranking: how fast
    this machine ran Python meanwhile (on the 2-core development VM it moved 18-35 ms
    between runs a minute apart, with nothing else running)."""
    _, median, least = median_ms(lambda: sum(i * i for i in range(300_000)), runs)
    return median, least


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.offers, args.runs = 200, 1
    board = offers(args.offers)
    runs, speeds = history()
    memory = memory_from(runs, NOW, 7, speeds)
    need = ModelNeed(model_bytes=4_912_898_304, kv_bytes=536_870_912, context=4096)
    model = OffersModel()
    model.set_offers(board)

    def outlooks() -> None:
        model.set_outlook(outlook_for(need, image="img", image_gb=3.6,
                                      has_image=memory.has_image, learned=memory.learned,
                                      model=MODEL))

    def ranking() -> None:
        outlooks()
        model.sort_key, model.ascending = SortKey.PER_MTOK, True
        model.set_filter("")
        model.view()
        model.widths()

    # The board's searches: new Offer objects each time (made here, outside the timing).
    answers = iter([offers(args.offers, seed=100 + n) for n in range(args.runs)])
    board_model = OffersModel()
    board_model.set_offers(board)

    def refresh() -> None:
        result = BoardResult(offers=next(answers), answered=["vastai"], memory=memory,
                             read_at=NOW, image="img", image_gb=3.6, model=MODEL)
        board_model.sort_key, board_model.ascending = SortKey.PER_MTOK, True
        refresh_board(board_model, result, result.outlook(need))
        board_model.view()
        board_model.widths()

    loop_before = calibration(args.runs)
    outlook_ms, outlook_cpu, outlook_least = median_ms(outlooks, args.runs)
    ranking_ms, ranking_cpu, ranking_least = median_ms(ranking, args.runs)
    refresh_ms, refresh_cpu, refresh_least = median_ms(refresh, args.runs)
    loop_after = calibration(args.runs)
    measured = sum(1 for key in model.view() if model.outlook(key).speed is not None
                   and model.outlook(key).speed.measured)  # type: ignore[union-attr]
    print(f"offers: {args.offers:,} ({measured:,} with a measured speed), runs: {args.runs}")
    print(f"outlooks (fit, ~ready, tok/s, $/Mtok): {outlook_ms:7.1f} ms wall, "
          f"{outlook_cpu:7.1f} ms CPU, least {outlook_least:.1f} ms "
          f"({outlook_cpu * 1000 / args.offers:.2f} us/offer)")
    judged = "not judged at smoke size)" if args.smoke else "the median)"
    print(f"re-rank by $/Mtok, offers unchanged (outlooks + order + widths): {ranking_ms:7.1f} "
          f"ms wall, {ranking_cpu:7.1f} ms CPU, least {ranking_least:.1f} ms (target < 50 ms "
          f"CPU, {judged}")
    print(f"refresh, {args.offers:,} new offers (memory + outlooks + offers + order + widths): "
          f"{refresh_ms:7.1f} ms wall, {refresh_cpu:7.1f} ms CPU, least {refresh_least:.1f} ms "
          f"(target < 50 ms CPU, {judged}")
    print("calibration, a fixed Python loop before and after (median/least ms CPU): "
          f"{loop_before[0]:.1f}/{loop_before[1]:.1f}, {loop_after[0]:.1f}/{loop_after[1]:.1f}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} cores")
    cheapest = model.outlook(model.view()[0])
    first = dataclasses.asdict(model.offer(model.view()[0]))  # type: ignore[arg-type]
    print(f"cheapest tokens: {first['gpu_name']} at {first['price_per_hour']} $/h, "
          f"{cheapest.speed.mtok_cell if cheapest.speed else '?'} $/Mtok")


if __name__ == "__main__":
    main()
