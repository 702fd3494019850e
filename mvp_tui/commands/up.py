"""`mvp-tui up`: run the engine — lease, bootstrap, serve, prompt — headless for now."""

from __future__ import annotations

import argparse
import asyncio

from mvp_tui.config import Config
from mvp_tui.engine.headless import UNTIL, UpOptions, run_up
from mvp_tui.exit_codes import ExitCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--headless",
        action="store_true",
        help="no screen: print every engine event and frame as a JSON line",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="rent without asking (required headless on a billing provider)",
    )
    parser.add_argument(
        "--until",
        choices=UNTIL,
        help="stop once a lease runs (leased) or the engine is ready (ready), "
        "leaving a rented lease running and recorded for `mvp-tui down`",
    )
    parser.add_argument(
        "--down-after", action="store_true", help="tear everything down (confirmed) before exiting"
    )
    parser.add_argument(
        "--prompt",
        action="append",
        default=[],
        metavar="TEXT",
        help="send this prompt once the engine is ready (repeatable)",
    )
    parser.add_argument(
        "--offer",
        action="append",
        default=[],
        metavar="ID",
        help="offer ids in fallback order; PROVIDER:ID names another provider's offer (e.g. "
        "local:local), walked in the same order (default: the best by the policy)",
    )
    parser.add_argument(
        "--max-offers",
        type=int,
        default=5,
        metavar="N",
        help="how many of the best offers to try in turn (default 5)",
    )


def run(config: Config, args: argparse.Namespace) -> int:
    if not args.headless:
        print(
            "mvp-tui: `up` without --headless: open the dashboard with `mvp-tui` instead "
            "(or add --headless)"
        )
        return int(ExitCode.USAGE)
    options = UpOptions(
        until=args.until,
        yes=args.yes,
        down_after=args.down_after,
        prompts=tuple(args.prompt),
        offer_ids=tuple(args.offer),
        max_offers=max(1, args.max_offers),
    )
    return asyncio.run(run_up(config, options))
