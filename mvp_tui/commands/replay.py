"""`mvp-tui replay FILE`: the dashboard on a datastream archive, read-only (no provider is
built, so nothing can be called), pausable and seekable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mvp_tui.config import Config
from mvp_tui.datastream.archive import ArchiveError, read_archive
from mvp_tui.exit_codes import ExitCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", type=Path, help="a JSONL frame archive "
                        "([observability] datastream_frame_log)")
    parser.add_argument("--speed", type=float, default=1.0, metavar="X",
                        help="replay speed (2 = twice as fast); + and - change it")


def count_records(path: Path) -> int:
    """How many frames the archive holds (for the position shown while replaying)."""
    return sum(1 for _ in read_archive(path))


def run(config: Config, args: argparse.Namespace) -> int:
    from mvp_tui.tui.app import MvpApp
    from mvp_tui.tui.replay_control import ReplayControl

    path: Path = args.file
    if not path.is_file():
        print(f"mvp-tui: replay: {path} does not exist or is not a file; pass a frame "
              "archive written by --datastream-frame-log", file=sys.stderr)
        return int(ExitCode.USAGE)
    if not args.speed > 0:
        print(f"mvp-tui: replay: --speed {args.speed} must be above 0", file=sys.stderr)
        return int(ExitCode.USAGE)
    try:
        total = count_records(path)
    except ArchiveError as exc:
        print(f"mvp-tui: replay: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    control = ReplayControl(path, total, speed=args.speed)
    app = MvpApp(config, hub=control.hub, replay=control)
    app.run()
    return int(app.return_code or 0)
