"""config.example.toml is derived from the key declarations, never edited by hand: it is
exactly what `python -m mvp_tui.config.example` writes."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config.example import render_example

REPO = Path(__file__).resolve().parents[2]


def test_the_example_file_is_the_derived_one() -> None:
    text = (REPO / "config.example.toml").read_text(encoding="utf-8")
    assert text == render_example(), (
        "config.example.toml differs from the key declarations: run "
        "`python -m mvp_tui.config.example > config.example.toml`"
    )
