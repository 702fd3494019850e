"""The summary line at ready: each stage's time, and a model fetched during the boot marked
as overlapped (its time ran beside the image pull and the SSH wait)."""

from __future__ import annotations

from mvp_tui.engine.ready_summary import stage_parts, summary_text


def test_a_model_fetched_at_boot_is_marked_overlapped() -> None:
    parts = stage_parts({"create": 5.0, "running": 60.0, "ssh": 10.0, "model": 80.0,
                         "engine": 16.0})
    line = summary_text(161.0, parts, 0.012, frozenset({"model"}))
    assert line == ("ready in 2:41 (image 1:05 · ssh 0:10 · model 1:20, overlapped · load 0:16) "
                    "· $0.012 spent before the first token")
    assert "overlapped" not in summary_text(161.0, parts, 0.012)
