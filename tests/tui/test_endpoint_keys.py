"""The dashboard's endpoint keys and palette commands: `y` / "Copy endpoint" copy the base URL
and key; `w` / "Open the engine's web UI" open it through the same local port, logged in by a
mode-600 page (never a key on the browser's command line), only ever on loopback; a key while
the idle stop warns tells the node."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.engine.events import EndpointReady, IdleStopNotice, RunState, RunStateChanged
from mvp_tui.lease.endpoint_record import EndpointRecord, save_endpoint
from mvp_tui.node_protocol import webui_code_valid, webui_host
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.endpoint_actions import WEBUI_PAGE_KEPT_S
from tests.tui.apps import engine_of, record_toasts
from tests.tui.test_dashboard_run import dashboard
from tests.widgets.data import wait_until

KEY = "mvp-test-key-0123456789abcdef"


def serving_app(tmp_path: Path, base_url: str = "http://127.0.0.1:8642") -> MvpApp:
    app, _seen = dashboard({"MVP_PROVIDER": "local"}, tmp_path)
    engine = engine_of(app)
    assert engine is not None
    engine.store.run_dir(engine.ctx.run_id).mkdir(parents=True)
    # Serving, as the engine leaves it: the endpoint file with the key (what `mvp-tui
    # endpoint` reads too), then its endpoint and state said through the port.
    endpoint = EndpointRecord(api_key=KEY, base_url=base_url, model="tiny", serving=True)
    engine.link.endpoint = endpoint
    save_endpoint(engine.store, engine.ctx.run_id, endpoint)
    app.port(EndpointReady(at=0.0, run_id=engine.ctx.run_id, base_url=base_url, model="tiny",
                           auth="key"))
    app.port(RunStateChanged(at=0.0, run_id=engine.ctx.run_id, state=RunState.SERVING.value))
    return app


def page_facts(url: str) -> tuple[int, str]:
    page = Path(url.removeprefix("file://"))
    return page.stat().st_mode & 0o777, page.read_text()


async def test_y_copies_base_url_and_key_and_w_opens_the_web_ui(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = serving_app(tmp_path)
    toasts = record_toasts(app)
    timers: list[tuple[float, Callable[[], object]]] = []
    set_timer = app.set_timer

    def recording_timer(delay: float, callback: Any = None, **kwargs: Any) -> Any:
        timers.append((delay, callback))
        return set_timer(delay, callback, **kwargs)

    monkeypatch.setattr(app, "set_timer", recording_timer)
    opened: list[str] = []
    app.web_opener = opened.append
    async with app.run_test(size=(160, 48)) as pilot:
        app.screen.set_focus(None)
        await pilot.press("y")
        assert app.clipboard == (
            f"OPENAI_BASE_URL=http://127.0.0.1:8642/v1\nOPENAI_API_KEY={KEY}\n"
        )
        assert toasts.raised and all(KEY not in t.message for t in toasts.raised)
        await pilot.press("w")
        await wait_until(pilot, lambda: bool(opened))
        (url,) = opened
        assert url.startswith("file://") and KEY not in url  # no key in the browser's argv
        mode, text = page_facts(url)
        assert mode == 0o600
        # A one-time code for the UI's own name, never the key itself.
        assert f'action="http://{webui_host(KEY)}:8642/mvp/webui"' in text and KEY not in text
        code = text.split('name="code" value="', 1)[1].split('"', 1)[0]
        assert webui_code_valid(KEY, code, time.time()) == (code.split(".")[0], "")
        run_dir = engine_of(app).store.run_dir(engine_of(app).ctx.run_id)
        assert (run_dir / "webui.html").exists()
        # Removed a few seconds later, by the app's timer (its callback run here at once).
        ((_, remove),) = [t for t in timers if t[0] == WEBUI_PAGE_KEPT_S]
        remove()
        assert not (run_dir / "webui.html").exists()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Copy endpoint (y)" in titles and "Open the engine's web UI (w)" in titles
        app._exit_cleared = True


async def test_the_web_ui_opens_only_on_loopback(tmp_path: Path) -> None:
    app = serving_app(tmp_path, base_url="http://192.0.2.5:8642")
    toasts = record_toasts(app)
    opened: list[str] = []
    app.web_opener = opened.append
    async with app.run_test(size=(160, 48)) as pilot:
        app.screen.set_focus(None)
        await pilot.press("w")
        await pilot.pause()
        assert opened == []
        assert toasts.saying("not on loopback")
        app._exit_cleared = True


async def test_the_keys_wait_until_the_node_serves(tmp_path: Path) -> None:
    app, _seen = dashboard({"MVP_PROVIDER": "local"}, tmp_path)
    opened: list[str] = []
    app.web_opener = opened.append
    async with app.run_test(size=(160, 48)) as pilot:
        app.screen.set_focus(None)
        assert app.check_action("copy_endpoint", ()) is None  # dimmed
        await pilot.press("w")
        await pilot.pause()
        assert opened == [] and app.clipboard == ""
        app._exit_cleared = True


async def test_a_key_while_the_idle_stop_warns_postpones_it(tmp_path: Path) -> None:
    app = serving_app(tmp_path)
    engine = engine_of(app)
    assert engine is not None
    told: list[str] = []

    async def postpone() -> bool:
        told.append("use")
        return True

    engine.serving.postpone_idle_stop = postpone  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        app.screen.set_focus(None)
        warning = IdleStopNotice(at=0.0, run_id=engine.ctx.run_id, state="warning",
                                 idle_stop_mins=30.0, stops_in_s=120.0)
        app.dashboard.route(warning)
        await wait_until(pilot, lambda: app._idle_warned)
        await pilot.press("down")
        await wait_until(pilot, lambda: told == ["use"])
        await pilot.press("down")
        await pilot.pause()
        assert told == ["use"]  # once per warning
        app._exit_cleared = True
