"""The palette's "Bench the served model" (issue 40 item 3): `mvp-tui bench` on the live run
from the dashboard, against the run's own endpoint (here a scripted OpenAI server on
loopback): one stream then 4, the table in a dialog, each level in the host journal."""

from __future__ import annotations

import time
from pathlib import Path

from textual.widgets import Static

from mvp_tui.lease.host_journal import HostJournal, HostOutcome
from mvp_tui.widgets.confirm import ConfirmScreen
from tests.prompt.fake_openai import Canned, fake_openai, sse
from tests.tui.apps import engine_of, record_toasts
from tests.tui.test_endpoint_keys import serving_app
from tests.widgets.data import wait_until

ANSWER = sse(*({"choices": [{"delta": {"content": f"w{i} "}}]} for i in range(12)),
             {"choices": [{"delta": {}, "finish_reason": "length"}]}, "[DONE]")


async def test_the_palette_benches_the_live_run_and_keeps_its_levels(tmp_path: Path) -> None:
    async with fake_openai(*(Canned(200, ANSWER) for _ in range(3000))) as fake:
        app = serving_app(tmp_path, base_url=fake.base_url)
        engine = engine_of(app)
        assert engine is not None
        HostJournal(app.config.state_dir).append(HostOutcome(
            at=time.time(), run_id=engine.ctx.run_id, provider="vastai", host="7001",
            offer_id="1", gpu_name="RTX 4090", stage="serving", ok=True, reason="",
            model="tiny.gguf"))
        app.bench_level_s = 0.4
        toasts = record_toasts(app)
        async with app.run_test(size=(160, 48)) as pilot:
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Bench the served model" in titles
            app.action_bench()
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 60)
            assert toasts.saying("measuring the served model at 1 then 4 stream(s)")
            body = "\n".join(str(s.render()) for s in app.screen.query(Static))
            lines = [line.split() for line in body.splitlines()]
            assert ["streams", "agg", "tok/s", "stream", "tok/s", "TTFT", "p50", "TTFT",
                    "p95", "requests", "errors", "$/Mtok"] in lines
            assert [r[0] for r in lines if r and r[0] in ("1", "4")] == ["1", "4"]
            assert "2 level(s) kept in the host journal" in body
            await pilot.press("escape")
            app._exit_cleared = True
    journal = HostJournal(app.config.state_dir)
    journal.read()
    levels = sorted(s.concurrency for s in journal.speeds if s.run_id == engine.ctx.run_id)
    assert levels == [1, 4]
    assert {(s.gpu_name, s.host, s.model) for s in journal.speeds} == {
        ("RTX 4090", "7001", "tiny.gguf")}
    assert all(s.decode_tok_s > 0 and s.tokens >= 12 for s in journal.speeds)
    assert fake.requests[0][0]["authorization"].startswith("Bearer mvp-test-key")


async def test_the_palette_bench_waits_until_the_node_serves(tmp_path: Path) -> None:
    from tests.tui.test_dashboard_run import dashboard

    app, _seen = dashboard({"MVP_PROVIDER": "local"}, tmp_path)
    toasts = record_toasts(app)
    async with app.run_test(size=(160, 48)) as pilot:
        app.action_bench()
        await pilot.pause()
        assert toasts.saying("the node is not serving yet")
        assert not isinstance(app.screen, ConfirmScreen)
        app._exit_cleared = True
