"""`mvp-tui bench [RUN] [--concurrency 1,4,8] [--duration S] [--json]`: the run's served model
measured under load.

Drives the run's OpenAI endpoint (found as `mvp-tui endpoint` finds it: the run's endpoint
record, RUN omitted the newest serving run) with N concurrent streams of a fixed prompt set
(`prompt/load.py`) per level, progress on stderr; prints per level the aggregate and
per-stream tok/s, TTFT p50/p95, errors and $/Mtok at the lease's $/h (the run record's).
Each level goes into the host journal as a speed line with its concurrency, under the GPU
model and host the run's serving attempt journaled: the board's tok/s and $/Mtok at
`[prompt] concurrency` then show what was measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TextIO

from mvp_tui.commands.endpoint import live, newest_serving
from mvp_tui.config import Config
from mvp_tui.engine.load_bench import (
    DEFAULT_MAX_TOKENS,
    keep,
    level_json,
    measure,
    render_table,
    served_on,
)
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.endpoint_record import EndpointRecord, load_endpoint
from mvp_tui.lease.host_journal import HostJournal
from mvp_tui.lease.records import RecordStore
from mvp_tui.prompt.load import LevelResult, Progress, parse_levels
from mvp_tui.untrusted import clean_line

DEFAULT_LEVELS = "1,4,8"
DEFAULT_DURATION_S = 20.0
BAR_CELLS = 24


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", nargs="?", metavar="RUN", help="a run id (default: the newest serving one)"
    )
    parser.add_argument("--concurrency", default=DEFAULT_LEVELS, metavar="N,N,...",
                        help=f"the levels: concurrent streams per level (default "
                             f"{DEFAULT_LEVELS})")
    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, metavar="S",
                        help=f"seconds per level (default {DEFAULT_DURATION_S:g})")
    parser.add_argument("--answer-tokens", type=int, default=DEFAULT_MAX_TOKENS, metavar="N",
                        help=f"max tokens per answer (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _fail(message: str, code: ExitCode = ExitCode.USAGE) -> int:
    print(f"mvp-tui bench: {message}", file=sys.stderr)
    return int(code)


class ProgressBar:
    """One line on stderr redrawn in place on a terminal; elsewhere a line per level."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._tty = out.isatty()

    def __call__(self, p: Progress) -> None:
        if not self._tty:
            return
        self._out.write("\r" + self.line(p))
        self._out.flush()

    @staticmethod
    def line(p: Progress) -> str:
        share = min(1.0, p.elapsed_s / p.duration_s) if p.duration_s > 0 else 1.0
        filled = round(share * BAR_CELLS)
        bar = "#" * filled + "-" * (BAR_CELLS - filled)
        return (f"bench {p.concurrency:>3} stream(s) [{bar}] {min(p.elapsed_s, p.duration_s):4.0f}"
                f"/{p.duration_s:g} s · {p.requests} requests · {p.tokens:,} tokens")

    def done(self, result: LevelResult) -> None:
        head = "\r" if self._tty else ""
        self._out.write(f"{head}bench {result.concurrency:>3} stream(s) done: "
                        f"{result.requests} requests, {result.tokens:,} tokens in "
                        f"{result.wall_s:.1f} s{' ' * 12}\n")
        self._out.flush()


def _resolve(store: RecordStore, run: str | None) -> tuple[str, EndpointRecord] | str:
    if run:
        try:
            endpoint = load_endpoint(store, run)
        except ValueError:
            endpoint = None
        if endpoint is None:
            return f"run {run} has no endpoint record; `mvp-tui ls --all` lists runs"
        if not live(endpoint):
            return (f"run {run} does not serve now (no mvp-tui holds its endpoint); bench a "
                    "serving run (`mvp-tui endpoint` names the newest)")
        return run, endpoint
    newest = newest_serving(store)
    if newest is None:
        return ("no run serves now; start one (`mvp-tui`, or `mvp-tui up --headless`), then "
                "bench it")
    return newest


def run(config: Config, args: argparse.Namespace) -> int:
    try:
        levels = parse_levels(args.concurrency)
    except ValueError as exc:
        return _fail(f"--concurrency {clean_line(args.concurrency, 80)!r}: {exc}; fix: give "
                     "levels such as 1,4,8")
    if not 0 < args.duration <= 3600:
        return _fail(f"--duration {args.duration:g}: give seconds per level, over 0, at most "
                     "3600")
    if not 1 <= args.answer_tokens <= 8192:
        return _fail(f"--answer-tokens {args.answer_tokens}: give 1 to 8192")
    store = RecordStore(config.state_dir)
    found = _resolve(store, args.run)
    if isinstance(found, str):
        return _fail(found)
    run_id, endpoint = found
    try:
        served = served_on(config.state_dir, run_id)
    except OSError as exc:
        return _fail(f"the host journal {HostJournal(config.state_dir).path} cannot be read: "
                     f"{exc}")
    if isinstance(served, str):
        return _fail(served)
    print(f"mvp-tui bench: run {run_id}: {served.model or endpoint.model} on "
          f"{served.gpu_name} ({served.provider}, host {served.host}); levels "
          f"{','.join(map(str, levels))}, {args.duration:g} s each", file=sys.stderr)
    bar = ProgressBar(sys.stderr)
    try:
        results = asyncio.run(measure(endpoint, levels, args.duration,
                                      answer_tokens=args.answer_tokens, progress=bar,
                                      level_done=bar.done))
    except KeyboardInterrupt:
        return _fail("stopped; nothing was journaled", ExitCode.RUN_FAILED)
    kept: list[LevelResult] = []
    journaled = True
    try:
        kept = keep(config.state_dir, run_id, served, results, time.time())
    except OSError as exc:
        journaled = False
        print(f"mvp-tui bench: warning: the host journal could not take the figures: {exc}",
              file=sys.stderr)
    price = served.price_per_hour
    if args.json:
        print(json.dumps({
            "run": run_id, "model": served.model, "gpu_name": served.gpu_name,
            "provider": served.provider, "host": served.host, "price_per_hour": price,
            "journaled": journaled and bool(kept),
            "levels": [level_json(r, price) for r in results],
        }))
    else:
        rate = "$/h not on record" if price is None else f"${price:.3f}/h"
        print(f"run {run_id} · {served.model} on {served.gpu_name} · {rate}")
        sys.stdout.write(render_table(results, price))
    for r in results:
        if r.first_error:
            print(f"mvp-tui bench: {r.concurrency} stream(s): {r.errors} failed; the first: "
                  f"{clean_line(r.first_error, 300)}", file=sys.stderr)
    if len([r for r in results if r.tokens > 0]) < len(results):
        return _fail("a level got no tokens (see the errors above); its figures were not "
                     "journaled", ExitCode.RUN_FAILED)
    return int(ExitCode.OK)
