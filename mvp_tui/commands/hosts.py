"""`mvp-tui hosts`: the host journal, newest first, one line per attempt (provider, host,
GPU, stage reached, ok or why it failed, what the engine offloaded to the GPUs, seconds,
cost); `avoided` marks the failures that
put a host last on the board and in headless runs now (`[lease] avoid_failed_hosts_days`).

Reads only the state dir: no provider is asked, nothing is imported beyond the journal.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime
from typing import Any

import msgspec

from mvp_tui.config import Config
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.host_journal import DAY_S, HostJournal, HostOutcome, failed_hosts
from mvp_tui.untrusted import clean_line

# The result (ok, or why it failed) last: the one long, ragged column.
COLUMNS = ("when", "provider", "host", "gpu", "stage", "secs", "$", "run", "result")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # `--provider X` is the configuration flag (the run's provider): given on this command's
    # line, it filters the list; unset, every provider is listed.
    parser.add_argument("--json", action="store_true", help="JSON lines, one per attempt")
    parser.add_argument(
        "--days", type=float, default=None, metavar="N", help="only the last N days' attempts"
    )


def _when(at: float) -> str:
    try:
        return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"


def _result(o: HostOutcome) -> str:
    # What the engine's log said it put on the GPUs: "ok" on a GPU node proves little alone.
    offload = f" · offload {o.offload.summary()}" if o.offload is not None else ""
    if o.ok:
        return "ok" + offload
    return (f"failed: {o.reason}" if o.reason else "failed") + offload


def _json(o: HostOutcome, avoided: bool) -> dict[str, Any]:
    return {
        "at": o.at, "run_id": o.run_id, "provider": o.provider, "host": o.host,
        "offer_id": o.offer_id, "gpu_name": o.gpu_name, "stage": o.stage, "ok": o.ok,
        "reason": o.reason, "stage_secs": dict(o.stage_secs), "seconds": round(o.seconds, 3),
        "cost_usd": o.cost_usd, "blames_host": o.blames_host, "avoided": avoided,
        "offload": msgspec.to_builtins(o.offload),
    }


def _row(o: HostOutcome, avoided: bool) -> tuple[str, ...]:
    result = clean_line(_result(o), 160) + (" [avoided]" if avoided else "")
    return (
        _when(o.at), clean_line(o.provider, 12), clean_line(o.host, 48),
        clean_line(o.gpu_name, 28), clean_line(o.stage, 12), f"{o.seconds:.0f}",
        f"{o.cost_usd:.3f}", clean_line(o.run_id, 40), result,
    )


def render_table(rows: list[tuple[str, ...]]) -> str:
    table = [COLUMNS, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return "\n".join(lines) + "\n"


def run(config: Config, args: argparse.Namespace) -> int:
    journal = HostJournal(config.state_dir)
    if not journal.exists():
        source = config.sources.get("state.dir") or "default"
        print(
            f"mvp-tui: no host journal at {journal.path}: no attempt has been recorded under "
            f"[state] dir = {str(config.state_dir)!r} (from {source}); runs add one line per "
            "attempt",
            file=sys.stderr,
        )
        return int(ExitCode.USAGE)
    now = time.time()
    outcomes = journal.read()
    kind_source = config.sources.get("provider.kind")
    provider = config.provider if kind_source is not None and kind_source.layer == "flag" else None
    if provider is not None:
        outcomes = [o for o in outcomes if o.provider == provider]
    days = args.days
    if days is not None and math.isfinite(days) and days >= 0:
        outcomes = [o for o in outcomes if o.at >= now - days * DAY_S]
    window = config.settings.lease.avoid_failed_hosts_days
    avoided = {
        id(failure)
        for p in {o.provider for o in outcomes}
        for failure in failed_hosts(outcomes, p, now, window).values()
    }
    outcomes.sort(key=lambda o: o.at, reverse=True)  # newest first
    if args.json:
        for o in outcomes:
            print(json.dumps(_json(o, id(o) in avoided)))
    else:
        sys.stdout.write(render_table([_row(o, id(o) in avoided) for o in outcomes]))
        what = f" on {provider}" if provider else ""
        print(f"{len(outcomes)} attempt(s){what} in {journal.path}", file=sys.stderr)
    if journal.corrupt:
        print(
            f"mvp-tui: {journal.corrupt} line(s) of {journal.path} could not be read; skipped",
            file=sys.stderr,
        )
    return int(ExitCode.OK)
