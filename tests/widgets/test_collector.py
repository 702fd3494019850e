"""Issue 40 §4/§5: the collector's full walks held while an answer streams, never for good
(prompts back to back would otherwise keep what survives the young generations forever)."""

from __future__ import annotations

import gc

from mvp_tui.widgets.collector import (
    HELD_AT_MOST_S,
    HELD_THRESHOLD,
    full_collections_held,
    hold_full_collections,
    resume_full_collections,
)


def test_a_hold_is_given_back_and_never_outlives_its_bound() -> None:
    oldest = gc.get_threshold()[2]
    try:
        hold_full_collections(now=100.0)
        assert gc.get_threshold()[2] == HELD_THRESHOLD and full_collections_held()
        hold_full_collections(now=100.0 + HELD_AT_MOST_S / 2)  # the next answer, soon after
        assert full_collections_held()
        hold_full_collections(now=100.0 + HELD_AT_MOST_S + 1)  # back to back for too long
        assert not full_collections_held() and gc.get_threshold()[2] == oldest
        hold_full_collections(now=200.0)
        resume_full_collections()
        assert not full_collections_held() and gc.get_threshold()[2] == oldest
    finally:
        resume_full_collections()
