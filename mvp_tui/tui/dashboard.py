"""Run the dashboard on a configuration: its engine, engines for the board's other
providers (a pick from another provider's offers), and the last-resort check that nothing
of any of its runs bills unnoticed once it ends."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mvp_tui.config import Config
from mvp_tui.exit_codes import ExitCode

if TYPE_CHECKING:
    from mvp_tui.datastream.hub import ChannelHub
    from mvp_tui.engine.controller import StopResult
    from mvp_tui.engine.run import RunEngine
    from mvp_tui.lease.records import RunRecord
    from mvp_tui.tui.app import MvpApp


def run_dashboard(
    config: Config,
    *,
    environ: Mapping[str, str] | None = None,
    wrap: Callable[[Config], Config] = lambda c: c,
    header: str = "",
) -> int:
    """`wrap` adjusts the configuration of each provider's engine (the rehearsal's loopback
    marketplace); `header` labels the status bar (e.g. "rehearsal")."""
    from mvp_tui.engine.run import RunEngine
    from mvp_tui.engine.ui_port import UiPort
    from mvp_tui.tui.app import MvpApp

    sink = UiPort()
    engine = RunEngine(config, sink, environ=environ)

    def engine_for(kind: str, hub: ChannelHub) -> RunEngine:  # on the session's hub
        return RunEngine(wrap(config.for_provider(kind)), sink, environ=environ, hub=hub,
                         ledger=engine.ledger)

    app = MvpApp(config, engine=engine, sink=sink, engine_for=engine_for, label=header)
    try:
        app.run()  # the app stops the run and closes the engine when it unmounts
    finally:
        code = after_app(app, engine)
    return code


def after_app(app: MvpApp, engine: RunEngine) -> int:
    """Whatever ended the app (a crash, a dead terminal), its runs' leases are either
    confirmed gone or named, with exit 3: each run is settled first (the app's completed
    stop, else its record's open leases destroyed now), then the receipt is said from the
    runs' records — never from messages still in flight — and the exit code is the
    receipt's: 0 only when it says nothing bills. The rehearsal ends the same way."""
    from mvp_tui.tui.last_resort import settle_run

    session = app.session
    engines = [*session.retired, session.engine] if session is not None else [engine]
    current = session.controller if session is not None else None
    results = [
        settle_run(e.config, e.ctx.run_id, current if e is engines[-1] else None) for e in engines
    ]
    runs = [(e.config.state_dir, e.ctx.run_id) for e in engines]
    receipt = exit_receipt(runs, results, time.time())
    keep_receipt(engines[-1], receipt.lines)
    say_receipt(receipt.lines)
    if receipt.may_bill:
        return int(ExitCode.MAY_BILL)
    return int(app.return_code or 0)


@dataclass(frozen=True, slots=True)
class ExitReceipt:
    lines: list[str]
    may_bill: bool  # something of these runs may still bill (exit 3)


def exit_receipt(
    runs: Sequence[tuple[Path, str]], results: Sequence[StopResult], now: float
) -> ExitReceipt:
    """The receipt of settled runs, from their records (the ledger rebuilt from them), and
    what the stops could not settle (a record unreadable, an unclear teardown)."""
    from mvp_tui.engine.ledger import LeaseLedger
    from mvp_tui.lease.account_check import recorded_check
    from mvp_tui.lease.records import RecordError, RecordStore

    records: list[RunRecord] = []
    errors: list[str] = []
    for state_dir, run_id in runs:  # (the state dir, the run id) of each run, in order
        store = RecordStore(state_dir)
        if not store.record_path(run_id).exists():
            continue
        try:
            records.append(store.load(run_id))
        except RecordError as exc:
            errors.append(f"mvp-tui: {exc}")
    ledger = LeaseLedger.from_records(records)
    checks = [(r.run_id, check) for r in records if (check := recorded_check(r)) is not None]
    # A run whose account could not be listed is not said to bill nothing: its deletes were
    # confirmed by id only.
    unchecked = {run_id for run_id, check in checks if not check.listed}
    lines = ledger.receipt(now, unchecked=unchecked)
    lines += deadline_lines(records, now)
    for _run_id, check in checks:  # what the provider's account showed after the teardown
        lines += check.lines(unconfirmed=False)  # the unconfirmed are lease lines above
    named = set(ledger.may_bill)
    for result in results:
        # What the record does not say: a lease it has no row for, and each error.
        lines += [
            f"mvp-tui: {line}" for ref, line in zip(result.left, result.left_lines(), strict=False)
            if ref.provider_id not in named and f"label {ref.label}" not in named
        ]
        lines += [f"mvp-tui: error: {error}" for error in result.errors]
    lines += errors
    unsettled = any(not r.nothing_bills for r in results) or bool(errors)
    return ExitReceipt(lines, bool(ledger.may_bill) or unsettled)


def deadline_lines(records: Sequence[RunRecord], now: float) -> list[str]:
    """For each lease that may still bill, when its node ends it on its own (`max_hours`)."""
    from mvp_tui.lease.deadline import deadline_at, deadline_text, max_hours
    from mvp_tui.untrusted import clean_line

    lines: list[str] = []
    for record in records:
        for lease in record.open_leases():
            at = deadline_at(lease, record.config)
            if at is None or not lease.provider_id:
                continue
            hours = max_hours(record.config)
            lines.append(
                f"lease {clean_line(lease.provider_id, 40)}: its node "
                f"{deadline_text(at, now)} on its own ([limits] max_hours = {hours:g})"
            )
    return lines


RECEIPT_FILE = "receipt.txt"


def keep_receipt(engine: RunEngine, lines: list[str]) -> None:
    """The receipt in the run's directory too (mode 600): a closed terminal cannot show it,
    and nothing the user is owed may be lost. Never raises (a full disk is said)."""
    from mvp_tui.lease.atomic import write_atomic
    from mvp_tui.lease.records import RecordStore

    if not lines:
        return
    try:
        run_dir = RecordStore(engine.config.state_dir).run_dir(engine.ctx.run_id)
        if run_dir.is_dir():
            write_atomic(run_dir / RECEIPT_FILE, ("\n".join(lines) + "\n").encode())
    except (OSError, ValueError) as exc:
        say_receipt([f"mvp-tui: the receipt could not be kept in the run's directory: {exc}"])


def say_receipt(lines: list[str]) -> None:
    """The receipt on stderr, after the screen is restored; a gone terminal is no error."""
    with contextlib.suppress(OSError, ValueError):
        for line in lines:
            print(line, file=sys.stderr, flush=True)
