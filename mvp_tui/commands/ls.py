"""`mvp-tui ls`: runs whose leases may still exist, from the records (no provider call).

Each lease shows its node's deadline: when the node's dead-man's switch destroys it on its
own (the lease's `running_at` + the run's `[limits] max_hours`), whether or not a dashboard
is attached. None when the run set no `max_hours` or the lease never ran. And its idle stop:
the node destroys its lease after that many minutes with no request to its model (from the
run's endpoint record; "idle stop off" when it has none).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from mvp_tui.config import Config
from mvp_tui.engine.ledger import LeaseLedger, money_text
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.deadline import deadline_at, deadline_text
from mvp_tui.lease.endpoint_record import load_endpoint
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.volumes import load_volumes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="JSON lines, one per lease")
    parser.add_argument("--all", action="store_true", help="closed runs too")


def idle_text(mins: float | None) -> str:
    return f"idle stop {mins:g} min" if mins else "idle stop off"


def run(config: Config, args: argparse.Namespace) -> int:
    scan = RecordStore(config.state_dir).scan()
    rows: list[dict[str, Any]] = []
    totals: list[str] = []
    now = time.time()
    for record in scan.runs:
        if not args.all and not record.is_open:
            continue
        endpoint = load_endpoint(RecordStore(config.state_dir), record.run_id)
        idle_stop = endpoint.idle_stop_mins if endpoint is not None else None
        # The money as the ledger has it (the figures the dashboard showed and the limits
        # enforced), rebuilt from the record alone.
        ledger = LeaseLedger.from_records([record])
        for lease in record.leases:
            if not args.all and not lease.may_bill:
                continue
            line = LeaseLedger.line_of(record.run_id, lease, now)
            rows.append({
                "run": record.run_id, "provider": record.provider,
                "provider_id": lease.provider_id, "label": lease.label,
                "state": lease.state.value, "price_per_hour": lease.price_per_hour,
                "may_bill": line.may_bill, "spent_usd": round(line.spend_usd, 6),
                "uptime_s": round(line.uptime_s, 3), "billed_usd": line.billed_usd,
                "gpu": lease.gpu_name, "deadline_at": deadline_at(lease, record.config),
                "idle_stop_mins": idle_stop,
            })
        billing = len(ledger.may_bill)
        totals.append(
            f"run {record.run_id}: {billing} lease(s) may bill · ${ledger.rate():.3f}/h · "
            f"{money_text(ledger.spent(now))} so far" if billing
            else f"run {record.run_id}: nothing bills · {money_text(ledger.spent(now))} in all"
        )
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        for r in rows:
            rate = f"${r['price_per_hour']:.3f}/h" if r["may_bill"] else "—"
            print(
                f"{r['run']:<14} {r['provider']:<8} {r['provider_id'] or '?':<12} "
                f"{r['state']:<10} {rate:>9}  {money_text(r['spent_usd']):>9}  "
                f"{deadline_text(r['deadline_at'], now):<30} {idle_text(r['idle_stop_mins']):<16} "
                f"{r['gpu']}  {r['label']}"
            )
        for total in totals:
            print(total)
        print(
            f"{len(rows)} lease(s) that may bill; tear down with `mvp-tui down RUN|--all`"
            if rows
            else "nothing recorded may bill",
            file=sys.stderr,
        )
    _volumes(config, args.json)
    for error in scan.errors:
        print(f"error: {error}", file=sys.stderr)
    return int(ExitCode.OK)


def _volumes(config: Config, as_json: bool) -> None:
    """The network volumes runs mounted: they bill by the month, lease or not."""
    for v in load_volumes(config.state_dir):
        if as_json:
            print(json.dumps({"volume": v.volume_id, "provider": v.provider, "name": v.name,
                              "size_gb": v.size_gb, "data_center": v.data_center,
                              "usd_per_month": round(v.usd_per_month, 4),
                              "last_run": v.last_run}))
            continue
        print(f"volume {v.volume_id:<12} {v.provider:<8} {v.name:<20} {v.size_gb} GB "
              f"{v.data_center:<10} ${v.usd_per_month:.2f}/month (${v.usd_per_gb_month:g}/GB"
              f"·month); `down` keeps it: `mvp-tui volume delete {v.volume_id}`")
