"""`mvp-tui down RUN|--all`: tear down recorded leases, confirmed by the provider."""

from __future__ import annotations

import argparse
import asyncio
import sys

from mvp_tui.config import Config
from mvp_tui.engine.headless import JsonLines
from mvp_tui.engine.providers import build_provider
from mvp_tui.engine.settings import walk_settings
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.restart import DownReport, down
from mvp_tui.secrets import Redactor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", metavar="RUN", help="the run id (see `mvp-tui ls`)")
    parser.add_argument("--all", action="store_true", help="every open run of this provider")
    parser.add_argument("--yes", action="store_true", help="do not ask before destroying")


def _confirm(what: str) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = input(f"Destroy {what}? Data on the node is lost. [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


async def _down(config: Config, run_id: str | None) -> DownReport:
    provider = build_provider(config)
    printer = JsonLines(sys.stdout, Redactor(config.secret_values()))
    try:
        settings = walk_settings(config, env={}, ssh_public_key=None)
        return await down(provider, RecordStore(config.state_dir), run_id, printer.event, settings)
    finally:
        await provider.aclose()


def run(config: Config, args: argparse.Namespace) -> int:
    if bool(args.run) == bool(args.all):
        print("mvp-tui: down needs a RUN id or --all (not both); see `mvp-tui ls`", file=sys.stderr)
        return int(ExitCode.USAGE)
    what = "every open run's leases" if args.all else f"the leases of run {args.run}"
    if not args.yes and not _confirm(what):
        print(
            "mvp-tui: not confirmed; nothing destroyed (add --yes to skip the question)",
            file=sys.stderr,
        )
        return int(ExitCode.USAGE)
    report = asyncio.run(_down(config, None if args.all else args.run))
    for ref in report.confirmed:
        print(f"deleted {ref.provider_id} ({ref.label}) of run {ref.run_id}", file=sys.stderr)
    for ref in report.unconfirmed:
        print(
            f"NOT CONFIRMED {ref.provider_id or ref.label} of run {ref.run_id}: {ref.reason}",
            file=sys.stderr,
        )
    for run_id in report.skipped_runs:
        print(
            f"skipped run {run_id}: it belongs to another provider (pass --provider)",
            file=sys.stderr,
        )
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    return int(ExitCode.OK if report.ok else ExitCode.MAY_BILL)
