"""`mvp-tui down RUN|--all`: tear down recorded leases, confirmed by the provider."""

from __future__ import annotations

import argparse
import asyncio
import sys

from mvp_tui.config import Config, ConfigError
from mvp_tui.engine.headless import JsonLines
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.records import RecordStore, RunRecord
from mvp_tui.lease.restart import DownReport, LeaseRef, down, runs_to_down
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.secrets import Redactor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", metavar="RUN", help="the run id (see `mvp-tui ls`)")
    parser.add_argument(
        "--all", action="store_true", help="every open run, whichever provider it rented on"
    )
    parser.add_argument("--yes", action="store_true", help="do not ask before destroying")


def _confirm(what: str) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = input(f"Destroy {what}? Data on the node is lost. [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


# The providers that bill: `down --all` asks each one a key is configured for, records or not.
_RENTED = ("vastai", "runpod")


async def _down(config: Config, run_id: str | None) -> DownReport:
    """Tear down every open lease of `run_id` (or of every open run), each through the
    provider its record names — whatever provider this configuration selects. `--all` then
    checks the account of every provider that bills and can be asked, records or not."""
    store = RecordStore(config.state_dir)
    runs, errors = runs_to_down(store, run_id)
    by_provider: dict[str, list[RunRecord]] = {}
    for record in runs:
        by_provider.setdefault(record.provider, []).append(record)
    kinds = list(by_provider)
    if run_id is None:
        kinds += [k for k in _RENTED if k not in kinds]
    printer = JsonLines(sys.stdout, Redactor(config.secret_values()))
    reports = [DownReport((), (), (), tuple(errors))]
    for kind in kinds:
        reports.append(
            await _down_provider(config, kind, by_provider.get(kind, []), store, printer, run_id)
        )
    return _merged(reports)


def _merged(reports: list[DownReport]) -> DownReport:
    return DownReport(
        tuple(ref for r in reports for ref in r.confirmed),
        tuple(ref for r in reports for ref in r.unconfirmed),
        (),
        tuple(dict.fromkeys(e for r in reports for e in r.errors)),  # a scan's, said once
        tuple(s for r in reports for s in r.secrets_left),
        tuple(a for r in reports for a in r.accounts),
    )


async def _down_provider(
    config: Config,
    kind: str,
    records: list[RunRecord],
    store: RecordStore,
    printer: JsonLines,
    run_id: str | None,
) -> DownReport:
    try:
        own = config.for_provider(kind)
        settings = WalkSettings.from_config(own)  # its delete timeouts, as `up` has them
        provider = build_provider(own)
    except ConfigError as exc:
        if not records:
            return DownReport((), (), (), ())  # no key and nothing on record: none to ask
        why = f"cannot reach {kind} to tear it down: {exc}"
        left = tuple(
            LeaseRef(r.run_id, lease.provider_id, lease.label, why)
            for r in records
            for lease in r.open_leases()
        )
        return DownReport((), left, (), ())
    printer.redact = Redactor([*config.secret_values(), *own.secret_values()])
    try:
        if run_id is None:  # every open run of it, then its whole account under our prefix
            return await down(
                provider, store, None, printer.event, settings,
                label_prefix=settings.label_prefix,
            )
        return await down(provider, store, run_id, printer.event, settings)
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
            f"NOT CONFIRMED: lease {ref.provider_id or ref.label} of run {ref.run_id} may still "
            f"bill: {ref.reason}",
            file=sys.stderr,
        )
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    for left in report.secrets_left:
        # A secret does not bill: a warning with its remedy, not exit code 3.
        secret_id = f" (id {left.secret_id})" if left.secret_id else ""
        print(
            f"warning: secret {left.name}{secret_id} of run {left.run_id} ({left.label}) is "
            f"still on the account: {left.reason}. It does not bill; remove it: {left.fix}",
            file=sys.stderr,
        )
    for line in report.account_lines():
        print(line, file=sys.stderr)
    return int(ExitCode.OK if report.ok else ExitCode.MAY_BILL)
