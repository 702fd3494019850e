"""`mvp-tui rehearse [--faults NAME]`: the whole lifecycle offline, in a minute: the real
dashboard against a simulated marketplace on loopback, this machine as the rented node."""

from __future__ import annotations

import argparse
import sys

from mvp_tui.config import Config
from mvp_tui.exit_codes import ExitCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mvp_tui.rehearsal.faults import FAULT_SETS

    names = "; ".join(f"{f.name}: {f.says}" for f in FAULT_SETS.values())
    parser.add_argument("--faults", metavar="NAME[,NAME]", default=None,
                        help=f"replay what can go wrong ({names})")


def run(config: Config, args: argparse.Namespace) -> int:
    from mvp_tui.rehearsal.faults import parse_faults
    from mvp_tui.rehearsal.session import build
    from mvp_tui.tui.dashboard import after_app

    try:
        faults = parse_faults(args.faults)
    except ValueError as exc:
        print(f"mvp-tui: rehearse: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    rehearsal = build(config, faults)
    app = rehearsal.app
    try:
        app.run()  # the app stops the run and closes the engine when it unmounts
        return after_app(app, rehearsal.engine)  # the receipt, as the dashboard says it
    finally:
        rehearsal.close()
