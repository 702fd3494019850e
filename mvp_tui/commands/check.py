"""`mvp-tui check`: the first thing to run. One line per check (✓ passed, ✗ failed with the
fix, – does not apply here): the config, each provider's API key (one authenticated read,
no spend), the SSH identity, the local engine, the state dir and the clock. Exit 0 only when
every check that applies passes, else 1 (a config that does not load exits 2 before any
check, as every command does).

`--live PROVIDER` runs a canary instead (preflight/live.py): lease the cheapest offer, bring
it up, stream one prompt, tear down and check the account, under `--max-spend`.

Provider text is untrusted and every line may quote it: all output is cleaned of control
and escape sequences and redacted of every configured secret before it is printed."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from typing import Any

from mvp_tui.config import Config
from mvp_tui.exit_codes import ExitCode
from mvp_tui.preflight.outcome import Check, CheckStatus
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

MARKS = {CheckStatus.OK: "✓", CheckStatus.FAILED: "✗", CheckStatus.SKIPPED: "–"}
FIX_LABEL = {CheckStatus.FAILED: "fix", CheckStatus.SKIPPED: "to use it"}
MAX_CHARS = 600


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mvp_tui.preflight.live_options import (
        DEFAULT_MAX_MINUTES,
        DEFAULT_MAX_SPEND_USD,
        LIVE_PROVIDERS,
    )

    parser.add_argument("--json", action="store_true",
                        help="one JSON object: ok, and each check's name, status, detail, fix "
                        "(with --live: each step, each fact, the exit code)")
    parser.add_argument(
        "--live", metavar="PROVIDER", choices=LIVE_PROVIDERS,
        help=f"a canary run on PROVIDER ({', '.join(LIVE_PROVIDERS)}): lease the cheapest "
        "offer, bring it up, stream one prompt, tear down and check the account; every step "
        "with its time and cost, then which unverified facts it proved. Rents: the cap bounds it",
    )
    parser.add_argument(
        "--max-spend", metavar="USD", type=_usd, default=DEFAULT_MAX_SPEND_USD,
        help=f"--live's spend cap (default ${DEFAULT_MAX_SPEND_USD:g}); the run tears down at "
        "it and the node is armed with its worth in time; below one minute of the cheapest "
        "offer nothing is rented (exit 2)",
    )
    parser.add_argument(
        "--max-minutes", metavar="N", type=_minutes, default=DEFAULT_MAX_MINUTES,
        help=f"--live's deadline (default {DEFAULT_MAX_MINUTES:g}), if sooner than the cap's "
        "worth; the node's switch ends the lease then, with or without this machine",
    )


def _usd(text: str) -> float:
    return _positive(text, "--max-spend", "USD, e.g. 0.10")


def _minutes(text: str) -> float:
    return _positive(text, "--max-minutes", "minutes, e.g. 20")


def _positive(text: str, flag: str, example: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{flag} {text!r} is not a positive number ({example})")
    return value


async def run_checks(config: Config) -> tuple[list[Check], list[str]]:
    """Every check in the order printed, and every secret the configurations hold."""
    from mvp_tui.preflight.accounts import MARKETS, clock_check, read_account
    from mvp_tui.preflight.local import (
        config_check,
        engine_check,
        identity_check,
        state_dir_check,
    )

    reads = await asyncio.gather(*(read_account(config, kind) for kind in MARKETS))
    rented = [read.config for read in reads if read.config is not None]
    checks = [
        config_check(config),
        *(read.check for read in reads),
        await identity_check(rented),
        engine_check(config),
        state_dir_check(config),
        clock_check(list(reads)),
    ]
    secrets = [*config.secret_values(), *(s for c in rented for s in c.secret_values())]
    return checks, secrets


def _clean(text: str, redact: Redactor) -> str:
    return clean_line(text, MAX_CHARS, redact=redact)


def as_json(check: Check, redact: Redactor) -> dict[str, Any]:
    return {
        "name": check.name,
        "status": check.status.value,
        "detail": _clean(check.detail, redact),
        "fix": _clean(check.fix, redact),
        "warnings": [_clean(w, redact) for w in check.warnings],
    }


def as_text(checks: list[Check], redact: Redactor) -> str:
    width = max(len(c.name) for c in checks)
    lines: list[str] = []
    for check in checks:
        lines.append(f"{MARKS[check.status]} {check.name.ljust(width)}  "
                     f"{_clean(check.detail, redact)}")
        lines += [f"    warning: {_clean(w, redact)}" for w in check.warnings]
        label = FIX_LABEL.get(check.status)
        if label and check.fix:
            lines.append(f"    {label}: {_clean(check.fix, redact)}")
    failed = sum(c.status is CheckStatus.FAILED for c in checks)
    skipped = sum(c.status is CheckStatus.SKIPPED for c in checks)
    passed = len(checks) - failed - skipped
    lines.append(f"{passed} passed, {failed} failed, {skipped} not applicable")
    return "\n".join(lines) + "\n"


def run(config: Config, args: argparse.Namespace) -> int:
    if args.live:
        from mvp_tui.preflight.live import run_live
        from mvp_tui.preflight.live_options import LiveOptions

        options = LiveOptions(args.live, args.max_spend, args.max_minutes, args.json)
        return asyncio.run(run_live(config, options))
    checks, secrets = asyncio.run(run_checks(config))
    redact = Redactor(secrets)
    ok = all(c.status is not CheckStatus.FAILED for c in checks)
    if args.json:
        json.dump({"ok": ok, "checks": [as_json(c, redact) for c in checks]}, sys.stdout,
                  ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(as_text(checks, redact))
    return int(ExitCode.OK if ok else ExitCode.RUN_FAILED)
