from __future__ import annotations

import re

import pytest

from mvp_tui.lease.naming import (
    attempt_label,
    belongs_to_run,
    new_run_id,
    node_prefix,
    parse_label,
    run_prefix,
)


def test_run_ids_are_fresh_and_never_the_seed_default() -> None:
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"r-[0-9a-f]{8}", i) for i in ids)
    assert "1" not in ids


def test_label_names_prefix_run_node_and_attempt() -> None:
    assert attempt_label("mvp", "r-7f3a", 1, 2) == "mvp-r-7f3a-1-2"
    assert parse_label("mvp-r-7f3a-1-2", "mvp") is not None
    parsed = parse_label("mvp-r-7f3a-3-12", "mvp")
    assert parsed is not None
    assert (parsed.run_id, parsed.node_id, parsed.attempt) == ("r-7f3a", 3, 12)


def test_run_r1_never_matches_run_r10() -> None:
    label_r10 = attempt_label("mvp", "r-10", 1, 1)
    assert label_r10.startswith("mvp-r-1")  # the trap a bare startswith falls into
    assert not belongs_to_run(label_r10, "mvp", "r-1")
    assert belongs_to_run(label_r10, "mvp", "r-10")
    assert not belongs_to_run(attempt_label("mvp", "r-1", 1, 1), "mvp", "r-10")
    assert not label_r10.startswith(run_prefix("mvp", "r-1"))


def test_matching_is_scoped_by_prefix_and_node() -> None:
    label = attempt_label("mvp", "r-ab", 2, 1)
    assert belongs_to_run(label, "mvp", "r-ab", 2)
    assert not belongs_to_run(label, "mvp", "r-ab", 1)
    assert not belongs_to_run(label, "other", "r-ab")
    assert not belongs_to_run("mvp-r-ab-2-1-extra", "mvp", "r-ab")
    assert not belongs_to_run(None, "mvp", "r-ab")
    assert not belongs_to_run("", "mvp", "r-ab")
    assert node_prefix("mvp", "r-ab", 2) == "mvp-r-ab-2-"


@pytest.mark.parametrize("prefix", ["", "a-b", "MVP", "x" * 25, "-x"])
def test_a_bad_prefix_is_refused_with_the_fix(prefix: str) -> None:
    with pytest.raises(ValueError, match="label_prefix"):
        attempt_label(prefix, "r-1", 1, 1)


@pytest.mark.parametrize("run_id", ["1a", "R-1", "r_1", "", "-1"])
def test_a_bad_run_id_is_refused(run_id: str) -> None:
    # A plain number is a valid run id (the seed's, see tests/seed); these are not.
    with pytest.raises(ValueError, match="run id"):
        attempt_label("mvp", run_id, 1, 1)
