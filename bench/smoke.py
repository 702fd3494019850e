"""What every bench shares: the `--smoke` switch (tiny sizes, no targets: CI runs each bench
this way so none can rot, tests/bench/test_bench_smoke.py), the machine's load printed beside
the figures, and runs that alternate which side goes first."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def add_smoke(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--smoke", action="store_true",
        help="tiny sizes and no targets: proves the bench still runs (CI), measures nothing",
    )


def load_note() -> str:
    """The 1/5/15-minute load averages and the cores, to print beside a figure: on a shared
    machine a figure means little without them."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


def verdict(ok: bool, smoke: bool) -> str:
    """A target's mark; a smoke run has none (its sizes are too small to mean anything)."""
    if smoke:
        return "(smoke: no target)"
    return "ok" if ok else "MISSED"


def alternating(rounds: int, *sides: Callable[[], T]) -> list[list[T]]:
    """Each side's results over `rounds`, the order reversed every other round, so neither
    side always runs first (warm caches, a neighbour's burst) — a warm-up round is the
    caller's to drop."""
    results: list[list[T]] = [[] for _ in sides]
    for n in range(rounds):
        order = list(enumerate(sides))
        if n % 2:
            order.reverse()
        for index, side in order:
            results[index].append(side())
    return results
