"""One rehearsal, assembled: the simulated marketplace started on loopback and stocked (with
the chosen fault sets), this machine as its node, the tiny generated model when none is
configured, and the real dashboard on top, labelled "rehearsal" everywhere."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from mvp_tui.config import Config
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.events import EngineEvent
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.local.kind import KIND as LOCAL
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.rehearsal.faults import FaultSet, stock_market
from mvp_tui.rehearsal.provider import RehearsalProvider
from mvp_tui.rehearsal.vastai_server import FakeVast
from mvp_tui.tui.app import MvpApp

LABEL = "rehearsal"


@dataclass(slots=True)
class Rehearsal:
    app: MvpApp
    engine: RunEngine
    market: FakeVast
    model: Path

    def close(self) -> None:
        self.market.stop()


def _fast(settings: WalkSettings) -> WalkSettings:
    """The simulation answers at once: poll it often so the walk reads in seconds."""
    return dataclasses.replace(
        settings, poll_interval_s=0.3, reconcile_waits_s=(0.3, 1.0), delete_poll_s=0.2
    )


def rehearsal_model(config: Config) -> Path:
    """The configured local model when it exists, else the tiny generated one (made once,
    in the state dir: no download, no network)."""
    configured = config.settings.model.gguf_local_path
    if configured is not None and configured.is_file():
        return configured
    path = config.state_dir / "rehearsal" / "tiny.gguf"
    if not path.is_file():
        from mvp_tui.rehearsal.tiny_gguf import write_tiny_gguf

        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_tiny_gguf(path)
    return path


def rehearsal_config(config: Config, model: Path) -> Config:
    """The user's configuration with this machine as the node and `model` served."""
    local = config.for_provider(LOCAL.name)  # this machine is the node
    return local.with_local_model(model, "the rehearsal's model")


def build(
    config: Config,
    faults: list[FaultSet],
    *,
    tap: Callable[[EngineEvent], None] | None = None,
    clock: Callable[[], datetime] = datetime.now,
) -> Rehearsal:
    """The rehearsal's dashboard (not yet running); `close()` stops the marketplace."""
    market = FakeVast(api_key=f"rehearsal-{secrets.token_hex(12)}")
    market.start()
    try:
        offers = stock_market(market)
        for fault in faults:
            fault.apply(market, offers)
        model = rehearsal_model(config)
        settings = rehearsal_config(config, model)
        provider = RehearsalProvider(market=VastAiProvider(api_key=market.api_key,
                                                           api_url=market.url))
        sink = UiPort()

        def both(event: EngineEvent) -> None:
            sink(event)
            if tap is not None:
                tap(event)

        engine = RunEngine(settings, both, provider=provider, settings_override=_fast)
        provider.set_line_handler(engine.bridge.on_line)
        app = MvpApp(settings, engine=engine, sink=sink, clock=clock, label=LABEL, board_kinds=())
    except BaseException:
        market.stop()
        raise
    return Rehearsal(app=app, engine=engine, market=market, model=model)
