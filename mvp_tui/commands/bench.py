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
from dataclasses import dataclass
from typing import TextIO

from mvp_tui.commands.endpoint import live, newest_serving
from mvp_tui.config import Config
from mvp_tui.engine.decode_speed import USD_PER_MTOK_FACTOR
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.endpoint_record import EndpointRecord, load_endpoint
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, SpeedSample
from mvp_tui.lease.records import RecordError, RecordStore
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.load import LevelResult, Progress, http_for, parse_levels, run_level
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

DEFAULT_LEVELS = "1,4,8"
DEFAULT_DURATION_S = 20.0
DEFAULT_MAX_TOKENS = 128
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


@dataclass(frozen=True, slots=True)
class Served:
    """Where the run serves, as its serving attempt was journaled, and its $/h."""

    provider: str
    host: str
    gpu_name: str
    model: str  # `model_key`
    price_per_hour: float | None


def usd_per_mtok(result: LevelResult, price_per_hour: float | None) -> float | None:
    """$ per million output tokens at `price_per_hour` under the level's load."""
    if price_per_hour is None or price_per_hour < 0 or result.aggregate_tok_s <= 0:
        return None
    return USD_PER_MTOK_FACTOR * price_per_hour / result.aggregate_tok_s


def level_json(result: LevelResult, price_per_hour: float | None) -> dict[str, object]:
    mtok = usd_per_mtok(result, price_per_hour)
    return {**result.as_json(), "usd_per_mtok": round(mtok, 4) if mtok is not None else None}


def served_by(outcomes: list[HostOutcome], run_id: str) -> HostOutcome | None:
    """The run's newest attempt that served, or None."""
    ok = [o for o in outcomes if o.run_id == run_id and o.ok]
    return max(ok, key=lambda o: o.at) if ok else None


def lease_price(store: RecordStore, run_id: str, offer_id: str) -> float | None:
    """The $/h of the run's lease of `offer_id` (the newest), or None when not on record."""
    try:
        record = store.load(run_id)
    except (RecordError, OSError):
        return None
    leases = [x for x in record.leases if x.offer_id == offer_id]
    return leases[-1].price_per_hour if leases else None


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


def render_table(results: list[LevelResult], price: float | None) -> str:
    head = ("streams", "agg tok/s", "stream tok/s", "TTFT p50", "TTFT p95", "requests",
            "errors", "$/Mtok")
    rows = [head]
    for r in results:
        mtok = usd_per_mtok(r, price)
        rows.append((
            str(r.concurrency), f"{r.aggregate_tok_s:,.1f}", f"{r.per_stream_tok_s:,.1f}",
            _ms(r.ttft_p50_ms), _ms(r.ttft_p95_ms), str(r.requests), str(r.errors),
            "?" if mtok is None else (f"{mtok:.2f}" if mtok < 100 else f"{mtok:,.0f}"),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) + "\n"
                   for row in rows)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def sample_of(result: LevelResult, run_id: str, served: Served, now: float) -> SpeedSample:
    return SpeedSample(
        at=now, run_id=run_id, provider=served.provider, host=served.host,
        gpu_name=served.gpu_name, model=served.model, decode_tok_s=result.aggregate_tok_s,
        ttft_ms=result.ttft_p50_ms or 0.0, tokens=result.tokens,
        concurrency=result.concurrency, per_stream_tok_s=result.per_stream_tok_s,
        ttft_p95_ms=result.ttft_p95_ms or 0.0, errors=result.errors,
    )


async def _measure(endpoint: EndpointRecord, levels: list[int], duration: float,
                   answer_tokens: int, bar: ProgressBar) -> list[LevelResult]:
    key = endpoint.api_key if endpoint.auth == "key" else None
    results: list[LevelResult] = []
    async with http_for(max(levels)) as http:
        client = PromptClient(endpoint.openai_base_url, endpoint.model, http=http, api_key=key,
                              redactor=Redactor())
        for n in levels:
            result = await run_level(client, n, duration, max_tokens=answer_tokens,
                                     progress=bar)
            bar.done(result)
            results.append(result)
    return results


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
    journal = HostJournal(config.state_dir)
    try:
        outcome = served_by(journal.read(), run_id)
    except OSError as exc:
        return _fail(f"the host journal {journal.path} cannot be read: {exc}")
    if outcome is None:
        return _fail(f"run {run_id} has no serving attempt in the host journal "
                     f"({journal.path}): its GPU and host are not known, so its figures could "
                     "not be kept; bench a run this install started")
    served = Served(outcome.provider, outcome.host, outcome.gpu_name, outcome.model,
                    lease_price(store, run_id, outcome.offer_id))
    print(f"mvp-tui bench: run {run_id}: {served.model or endpoint.model} on "
          f"{served.gpu_name} ({served.provider}, host {served.host}); levels "
          f"{','.join(map(str, levels))}, {args.duration:g} s each", file=sys.stderr)
    bar = ProgressBar(sys.stderr)
    try:
        results = asyncio.run(_measure(endpoint, levels, args.duration, args.answer_tokens,
                                       bar))
    except KeyboardInterrupt:
        return _fail("stopped; nothing was journaled", ExitCode.RUN_FAILED)
    now = time.time()
    kept = [r for r in results if r.tokens > 0]
    journaled = True
    try:
        for result in kept:
            journal.append_speed(sample_of(result, run_id, served, now))
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
    if len(kept) < len(results):
        return _fail("a level got no tokens (see the errors above); its figures were not "
                     "journaled", ExitCode.RUN_FAILED)
    return int(ExitCode.OK)
