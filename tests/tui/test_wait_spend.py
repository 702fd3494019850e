"""Stage timers and the price of waiting: the Bootstrap pane's last line while a node comes
up (this attempt's wait and cost, and the run's), and the summary line at ready."""

from __future__ import annotations

from mvp_tui.engine.events import NodeReady, ReadySummary
from mvp_tui.engine.ready_summary import stage_parts, summary_text
from mvp_tui.lease import events as ev
from mvp_tui.widgets.wait_spend import WaitSpend

T0 = 1_764_504_180.0


def running(provider_id: str, at: float, price: float) -> ev.LeaseRunning:
    return ev.LeaseRunning(at=at, run_id="r-7f3a", provider_id=provider_id, label="l",
                           host="h", port=22, user="root", via="direct", after_s=40.0,
                           price_per_hour=price)


def test_the_summary_line_names_each_stage_and_the_money() -> None:
    secs = {"create": 60.0, "running": 5.0, "ssh": 10.0, "agent": 2.0, "model": 80.0,
            "engine": 16.0}
    parts = stage_parts(secs)
    assert parts == (("image", 65.0), ("ssh", 10.0), ("agent", 2.0), ("model", 80.0),
                     ("load", 16.0))
    assert summary_text(161.0, parts, 0.0123) == (
        "ready in 2:41 (image 1:05 · ssh 0:10 · agent 0:02 · model 1:20 · load 0:16) · "
        "$0.012 spent before the first token"
    )
    assert stage_parts({"create": 3.0}) == (("image", 3.0),)


def test_the_waiting_line_counts_this_attempt_and_the_run() -> None:
    wait = WaitSpend()
    assert wait.line(T0) == ""
    wait.handle(running("7001", T0 + 40, 0.36))  # created at T0
    assert wait.line(T0 + 100) == "waiting 1:40 · $0.0100 (run $0.0100)"
    wait.handle(ev.LeaseDeleted(at=T0 + 120, run_id="r-7f3a", provider_id="7001",
                                uptime_s=120, spend_usd=0.012))
    assert wait.line(T0 + 130) == ""  # between attempts: nothing waits on a lease
    wait.handle(running("7002", T0 + 200, 0.72))  # the next host, created at T0 + 160
    assert wait.line(T0 + 210) == "waiting 0:50 · $0.0100 (run $0.0220)"
    wait.handle(NodeReady(at=T0 + 299, run_id="r-7f3a", model_id="m", engine="llama-server",
                          local_url="http://127.0.0.1:1", load_ms=10))
    assert wait.line(T0 + 299.5) == ""  # serving: no longer waiting
    text = "ready in 5:00 · $0.040 spent\x1b[2J"
    wait.handle(ReadySummary(at=T0 + 300, run_id="r-7f3a", seconds=300, stages=(),
                             spent_usd=0.04, text=text))
    assert wait.line(T0 + 400) == "ready in 5:00 · $0.040 spent"  # cleaned, and it stays


def test_headless_prints_the_summary_once_as_a_human_line(capsys) -> None:  # type: ignore[no-untyped-def]
    import io

    from mvp_tui.engine.headless import JsonLines
    from mvp_tui.secrets import Redactor

    out = io.StringIO()
    lines = JsonLines(out, Redactor([]))
    text = "ready in 2:41 (image 1:05) · $0.012"
    lines.event(ReadySummary(at=T0, run_id="r-7f3a", seconds=161, stages=(("image", 65.0),),
                             spent_usd=0.012, text=text))
    assert "ready_summary" in out.getvalue() and text in out.getvalue()
    assert capsys.readouterr().err == "mvp-tui: ready in 2:41 (image 1:05) · $0.012\n"
