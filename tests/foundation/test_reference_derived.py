"""docs/configuration.md is derived from the key declarations, as config.example.toml is: it is
exactly what `python -m mvp_tui.config.reference` writes, and it shows every key with its
type, default, env names and flag, its prose escaped so no declaration reads as markup."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config.reference import COMMAND, escape, prose, render_reference
from mvp_tui.config.schema import KEYS, SECTIONS

REPO = Path(__file__).resolve().parents[2]


def test_the_reference_page_is_the_derived_one() -> None:
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert text == render_reference(), (
        f"docs/configuration.md differs from the key declarations: run `{COMMAND}`"
    )


def test_every_section_and_key_has_its_heading_and_facts() -> None:
    page = render_reference()
    for section in SECTIONS:
        assert f"## `[{section}]` {{#{section}}}" in page
    for spec in KEYS:
        heading = f"### `{spec.name}` {{#{spec.section}-{spec.name}}}"
        assert heading in page, heading
        entry = page.split(heading, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        assert "**type**:" in entry and "**default**:" in entry
        for name in spec.env:
            assert f"`{name}`" in entry, (spec.dotted, name)
        if spec.flag:
            assert f"`{spec.flag}`" in entry, spec.dotted


def test_prose_is_escaped_but_its_code_spans_are_kept() -> None:
    assert escape("a_b *c* [d](e) <f> {#g}") == r"a\_b \*c\* \[d\](e) &lt;f&gt; \{#g\}"
    assert prose("run `mvp-tui down` [now]") == r"run `mvp-tui down` \[now\]"
    assert prose("an odd ` tick") == r"an odd \` tick"
