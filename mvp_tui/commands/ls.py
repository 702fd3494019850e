"""`mvp-tui ls`: runs whose leases may still exist, from the records (no provider call)."""

from __future__ import annotations

import argparse
import json
import sys

from mvp_tui.config import Config
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.records import RecordStore


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="JSON lines, one per lease")
    parser.add_argument("--all", action="store_true", help="closed runs too")


def run(config: Config, args: argparse.Namespace) -> int:
    scan = RecordStore(config.state_dir).scan()
    rows = []
    for record in scan.runs:
        if not args.all and not record.is_open:
            continue
        for lease in record.leases:
            if not args.all and not lease.may_bill:
                continue
            rows.append({
                "run": record.run_id, "provider": record.provider,
                "provider_id": lease.provider_id, "label": lease.label,
                "state": lease.state.value, "price_per_hour": lease.price_per_hour,
                "gpu": lease.gpu_name,
            })  # fmt: skip
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        for r in rows:
            print(
                f"{r['run']:<14} {r['provider']:<8} {r['provider_id'] or '?':<12} "
                f"{r['state']:<10} ${r['price_per_hour']:.3f}/h  {r['gpu']}  {r['label']}"
            )
        print(
            f"{len(rows)} lease(s) that may bill; tear down with `mvp-tui down RUN|--all`"
            if rows
            else "nothing recorded may bill",
            file=sys.stderr,
        )
    for error in scan.errors:
        print(f"error: {error}", file=sys.stderr)
    return int(ExitCode.OK)
