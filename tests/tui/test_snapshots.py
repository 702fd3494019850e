"""Screens that matter, as SVG snapshots: fixed size, clock, config and theme."""

from __future__ import annotations

import pytest

from tests.tui.apps import make_app


@pytest.mark.parametrize("theme", ["mvp-dark", "mvp-light"])
@pytest.mark.parametrize("size", [(160, 48), (100, 30)])
def test_shell(snap_compare, theme: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(theme=theme), terminal_size=size)


def test_help_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), press=["question_mark"], terminal_size=(160, 48))
