"""Run the dashboard on a configuration: its engine, engines for the board's other
providers (a pick from another provider's offers), and the last-resort check that nothing
of any of its runs bills unnoticed once it ends."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mvp_tui.config import Config

if TYPE_CHECKING:
    from mvp_tui.engine.run import RunEngine
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

    def engine_for(kind: str) -> RunEngine:
        return RunEngine(wrap(config.for_provider(kind)), sink, environ=environ)

    app = MvpApp(config, engine=engine, sink=sink, engine_for=engine_for, label=header)
    try:
        app.run()  # the app stops the run and closes the engine when it unmounts
    finally:
        code = after_app(app, engine)
    return code


def after_app(app: MvpApp, engine: RunEngine) -> int:
    """Whatever ended the app (a crash, a dead terminal), its runs' leases are either
    confirmed gone or named here with exit 3 (an engine the app replaced first); the
    receipt of a stop the app completed is said first. The rehearsal ends the same way."""
    from mvp_tui.tui.last_resort import after_dashboard

    session = app.session
    final = session.engine if session is not None else engine
    stopped = session is not None and session.stopped is not None
    said = app.receipts.named if stopped else frozenset()
    if stopped:  # the receipt is true only of a stop the app completed
        say_receipt(app.receipts.lines(time.time()))
    codes = [
        after_dashboard(earlier.config, earlier.run_id, None, app.return_code)
        for earlier in (session.retired if session is not None else [])
    ]
    controller = session.controller if session is not None else None
    codes.append(after_dashboard(final.config, final.run_id, controller,
                                 app.return_code, said=said))
    return max(codes)


def say_receipt(lines: list[str]) -> None:
    """The receipt on stderr, after the screen is restored; a gone terminal is no error."""
    with contextlib.suppress(OSError, ValueError):
        for line in lines:
            print(line, file=sys.stderr, flush=True)
