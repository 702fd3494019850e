"""`mvp-tui down RUN|--all|--instance PROVIDER:ID`: tear down what this install made,
confirmed by the provider.

Ours is a lease a run record here holds or an instance carrying this install's tag
(`lease/ownership.py`); nothing else is destroyed under `--yes`. Instances merely named like
mvp-tui runs are reported, each with `mvp-tui down --instance PROVIDER:ID`, which shows the
one instance and asks; `--include-foreign` lists them all first and asks again."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from mvp_tui.config import Config, ConfigError
from mvp_tui.engine.headless import JsonLines
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.ownership import Holdings, Stranger, Whose, claim, strangers_lines
from mvp_tui.lease.records import RecordStore, RunRecord
from mvp_tui.lease.restart import DownReport, LeaseRef, down, runs_to_down
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.survey import Survey, survey
from mvp_tui.lease.teardown import delete_confirmed
from mvp_tui.providers.base import LeaseState, ProviderError
from mvp_tui.providers.registry import RENTED
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", metavar="RUN", help="the run id (see `mvp-tui ls`)")
    parser.add_argument(
        "--all", action="store_true",
        help=("every open run recorded here, whichever provider it rented on, and every "
              "instance carrying this install's tag on each provider a key is set for"),
    )
    parser.add_argument(
        "--instance", metavar="PROVIDER:ID",
        help="one instance by its provider id (e.g. vastai:8123): shows what it is and asks",
    )
    parser.add_argument(
        "--include-foreign", action="store_true",
        help=("with RUN or --all: also the instances named like mvp-tui runs that this "
              "install did not make; lists them first and asks again (never with --yes alone)"),
    )
    parser.add_argument(
        "--yes", action="store_true",
        help="do not ask before destroying what is ours (never extends to others' instances)",
    )


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = input(f"{question} Data on the node is lost. [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


# The providers that bill (their kinds say): `down --all` asks each one a key is configured
# for, records or not.
_RENTED = RENTED


def _kinds(store: RecordStore, run_id: str | None) -> tuple[dict[str, list[RunRecord]], list[str]]:
    """The records `down` works on by provider, and the providers to ask: theirs, and for
    `--all` every provider that bills (an instance carrying our tag may have lost its record)."""
    runs, _errors = runs_to_down(store, run_id)
    by_provider: dict[str, list[RunRecord]] = {}
    for record in runs:
        by_provider.setdefault(record.provider, []).append(record)
    kinds = list(by_provider)
    if run_id is None:
        kinds += [k for k in _RENTED if k not in kinds]
    return by_provider, kinds


async def _down(
    config: Config, run_id: str | None, end_strangers: dict[str, set[str]]
) -> DownReport:
    """Tear down every open lease of `run_id` (or of every open run), each through the
    provider its record names — whatever provider this configuration selects. `--all` then
    checks the account of every provider that bills and can be asked, records or not; what
    is not ours is reported, but for the ids in `end_strangers` (provider -> ids), which the
    person listed and confirmed."""
    store = RecordStore(config.state_dir)
    _runs, errors = runs_to_down(store, run_id)
    by_provider, kinds = _kinds(store, run_id)
    printer = JsonLines(sys.stdout, Redactor(config.secret_values()))
    reports = [DownReport((), (), (), tuple(errors))]
    for kind in kinds:
        reports.append(
            await _down_provider(
                config, kind, by_provider.get(kind, []), store, printer, run_id,
                end_strangers.get(kind, set()),
            )
        )
    return _merged(reports)


async def _surveys(config: Config, run_id: str | None) -> list[Survey]:
    """What `down` would destroy and leave alone on each provider it would ask."""
    store = RecordStore(config.state_dir)
    by_provider, kinds = _kinds(store, run_id)
    found: list[Survey] = []
    for kind in kinds:
        try:
            own = config.for_provider(kind)
            settings = WalkSettings.from_config(own)
            provider = build_provider(own)
        except ConfigError as exc:
            if by_provider.get(kind):
                leases = sum(len(r.open_leases()) for r in by_provider[kind])
                found.append(Survey(kind, len(by_provider[kind]), leases, (), (), str(exc)))
            continue
        try:
            found.append(await survey(
                provider, store, label_prefix=settings.label_prefix,
                owner_tag=settings.install_tag(store.state_dir), run_id=run_id,
            ))
        finally:
            await provider.aclose()
    return found


def confirm_question(surveys: list[Survey], run_id: str | None) -> str:
    """The confirm in numbers: leases of runs recorded here, instances carrying this
    install's tag without a record, and the others left alone."""
    runs = sum(s.recorded_runs for s in surveys)
    leases = sum(s.recorded_leases for s in surveys)
    tagged = sum(len(s.tagged) for s in surveys)
    others = sum(len(s.strangers) for s in surveys)
    scope = f"run {run_id}" if run_id else f"{runs} {_plural('run', runs)}"
    parts = [f"{leases} {_plural('lease', leases)} of {scope} recorded here"]
    where = ", ".join(f"{s.provider} {len(s.tagged)}" for s in surveys if s.tagged)
    parts.append(
        f"{tagged} {_plural('instance', tagged)} carrying this install's tag with no record "
        "here" + (f" ({where})" if where else "")
    )
    question = "Destroy " + " and ".join(parts) + "?"
    question += (
        f" {others} other {_plural('instance', others)} named like mvp-tui runs "
        f"{'is' if others == 1 else 'are'} left alone."
    )
    unlisted = [s.provider for s in surveys if s.error]
    if unlisted:
        question += f" (Not listed: {', '.join(unlisted)}; counted from the records only.)"
    return question


def _plural(noun: str, n: int) -> str:
    return noun if n == 1 else noun + "s"


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
    end_strangers: set[str],
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
                label_prefix=settings.label_prefix, end_strangers=end_strangers,
            )
        return await down(
            provider, store, run_id, printer.event, settings, end_strangers=end_strangers
        )
    finally:
        await provider.aclose()


def run(config: Config, args: argparse.Namespace) -> int:
    instance = getattr(args, "instance", None)  # callers may build the namespace by hand
    include_foreign = bool(getattr(args, "include_foreign", False))
    if instance:
        if args.run or args.all or include_foreign:
            print("mvp-tui: down --instance takes one PROVIDER:ID alone", file=sys.stderr)
            return int(ExitCode.USAGE)
        return asyncio.run(_down_instance(config, instance, yes=args.yes))
    if bool(args.run) == bool(args.all):
        print("mvp-tui: down needs a RUN id or --all (not both); see `mvp-tui ls`", file=sys.stderr)
        return int(ExitCode.USAGE)
    run_id = None if args.all else args.run
    end: dict[str, set[str]] = {}
    if include_foreign:
        if args.yes:
            print(
                "mvp-tui: --include-foreign destroys instances this install did not make: it "
                "lists them and asks, and is refused with --yes; end one without asking with "
                "`mvp-tui down --instance PROVIDER:ID --yes`",
                file=sys.stderr,
            )
            return int(ExitCode.USAGE)
        surveys = asyncio.run(_surveys(config, run_id))
        strangers = [x for s in surveys for x in s.strangers]
        for line in strangers_lines(strangers):
            print(line, file=sys.stderr)
        if strangers and _confirm(
            f"Also destroy these {len(strangers)} {_plural('instance', len(strangers))} "
            "that this install did not make?"
        ):
            for x in strangers:
                end.setdefault(x.provider, set()).add(x.provider_id)
        elif strangers:
            print("mvp-tui: the instances not made here stay; asking about ours next",
                  file=sys.stderr)
    if not args.yes:
        question = confirm_question(asyncio.run(_surveys(config, run_id)), run_id)
        if end:
            n = sum(len(ids) for ids in end.values())
            question = question.rstrip("?.") + f"; and the {n} not made here, as confirmed?"
        if not _confirm(question):
            print(
                "mvp-tui: not confirmed; nothing destroyed (add --yes to skip the question)",
                file=sys.stderr,
            )
            return int(ExitCode.USAGE)
    report = asyncio.run(_down(config, run_id, end))
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


async def _down_instance(config: Config, target: str, *, yes: bool) -> int:
    """`down --instance PROVIDER:ID`: show the one instance (whose it is, its label, state,
    $/h and age) and destroy it, confirmed, once the person says so."""
    kind, _, provider_id = target.partition(":")
    if kind not in _RENTED or not provider_id or not provider_id.isprintable():
        print(f"mvp-tui: --instance wants PROVIDER:ID with PROVIDER one of {', '.join(_RENTED)} "
              f"(e.g. vastai:8123), not {clean_line(target, 80)!r}", file=sys.stderr)
        return int(ExitCode.USAGE)
    own = config.for_provider(kind)
    settings = WalkSettings.from_config(own)
    provider = build_provider(own)
    store = RecordStore(config.state_dir)
    try:
        try:
            status = await provider.get(provider_id)
        except ProviderError as exc:
            print(f"mvp-tui: cannot read {kind} {clean_line(provider_id, 64)}: {exc}",
                  file=sys.stderr)
            return int(ExitCode.MAY_BILL)
        if status.state is LeaseState.GONE:
            print(f"{kind} {clean_line(provider_id, 64)} does not exist: nothing bills",
                  file=sys.stderr)
            return int(ExitCode.OK)
        tag = settings.install_tag(store.state_dir)
        whose = claim(status, settings.label_prefix, tag,
                      Holdings.of(store.scan().runs, kind))
        why = {Whose.RECORDED: f"ours: run {whose.run_id} recorded here",
               Whose.TAGGED: f"ours: carries this install's tag (run {whose.run_id})"}.get(
                   whose.whose, f"NOT made by this install: {whose.why}")
        shown = Stranger.of(kind, status, why, time.time())
        print(shown.line().split("; end it with", 1)[0], file=sys.stderr)
        if not yes and not _confirm(f"Destroy {kind} {clean_line(provider_id, 64)}?"):
            print("mvp-tui: not confirmed; nothing destroyed", file=sys.stderr)
            return int(ExitCode.USAGE)
        check = await delete_confirmed(provider, provider_id, settings)
    finally:
        await provider.aclose()
    if check.confirmed:
        print(f"deleted {kind} {clean_line(provider_id, 64)}, confirmed", file=sys.stderr)
        if whose.whose is not Whose.STRANGER:
            print(f"its run's record is settled by `mvp-tui down {whose.run_id}`",
                  file=sys.stderr)
        return int(ExitCode.OK)
    print(f"NOT CONFIRMED: {kind} {clean_line(provider_id, 64)} may still bill: {check.reason}",
          file=sys.stderr)
    return int(ExitCode.MAY_BILL)
