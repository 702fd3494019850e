"""A run session owns one channel hub: every engine it makes (a pick on another provider)
is given it, so the panes and the headless printer attach once; a retired engine takes its
listeners off it and leaves its archive open for the next engine's frames."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.session import RunSession


def engine(
    tmp_path: Path, provider: str, ledger: LeaseLedger | None = None,
    hub: ChannelHub | None = None,
) -> RunEngine:
    config = load_config(
        env={"MVP_STATE_DIR": str(tmp_path / "state"), "MVP_PROVIDER": provider,
             "MVP_VASTAI_API_KEY": "test-key-not-used",
             "MVP_DATASTREAM_FRAME_LOG": str(tmp_path / "frames.jsonl")},
        paths=ConfigPaths(default=tmp_path / "none.toml"),
    )
    return RunEngine(config, lambda _event: None, environ={}, ledger=ledger, hub=hub)


async def test_a_provider_switch_keeps_the_sessions_hub(tmp_path: Path) -> None:
    first = engine(tmp_path, "local")
    hub = first.hub
    made: list[RunEngine] = []

    def engine_for(kind: str, given: ChannelHub) -> RunEngine:
        made.append(engine(tmp_path, kind, first.ledger, given))
        return made[-1]

    session = RunSession(first, engine_for)
    seen: list[str] = []
    hub.listeners.append(lambda frame: seen.append(frame.channel))  # a pane, attached once
    own_listeners = len(hub.listeners)
    session.started()
    fresh = await session.use("vastai")
    assert fresh is made[0] and fresh.hub is hub is session.hub
    assert session.retired == [first]
    # The retired engine's listeners are off the hub; the fresh one's are on it.
    assert not any(getattr(x, "__self__", None) in (first.verdicts, first.attempt)
                   for x in hub.listeners)
    assert any(getattr(x, "__self__", None) is fresh.verdicts for x in hub.listeners)
    assert len(hub.listeners) == own_listeners
    assert hub.archive is not None and not hub.archive.closed  # the next engine writes on
    seen.clear()
    fresh.ctx.log("the fresh engine's line")
    assert seen, "the fresh engine's frames reach what was attached to the session's hub"
    await session.close()
    assert hub.archive.closed


async def test_an_engine_on_another_hub_is_refused(tmp_path: Path) -> None:
    first = engine(tmp_path, "local")
    session = RunSession(first, lambda kind, _hub: engine(tmp_path, kind, first.ledger))
    with pytest.raises(RuntimeError, match="the session's hub"):
        await session.use("vastai")
    await session.close()
