from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from mvp_tui.install_tag import TAG_FILE, install_tag, kept_tag
from mvp_tui.labels import (
    ParsedLabel,
    attempt_label,
    belongs_to_run,
    node_prefix,
    parse_label,
    run_prefix,
)
from mvp_tui.lease.naming import new_run_id

TAG = "a1b2c3d4e5"


def test_run_ids_are_fresh_and_never_the_seed_default() -> None:
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"r-[0-9a-f]{8}", i) for i in ids)
    assert "1" not in ids


def test_label_names_prefix_tag_run_node_and_attempt() -> None:
    assert attempt_label("mvp", TAG, "r-7f3a", 1, 2) == f"mvp-{TAG}-r-7f3a-1-2"
    parsed = parse_label(f"mvp-{TAG}-r-7f3a-3-12", "mvp")
    assert parsed == ParsedLabel("mvp", "r-7f3a", 3, 12, TAG)
    assert parse_label(f"mvp-{TAG}-41-0-1", "mvp") == ParsedLabel("mvp", "41", 0, 1, TAG)


def test_a_label_from_before_tags_parses_with_no_tag() -> None:
    assert attempt_label("mvp", "", "r-7f3a", 1, 2) == "mvp-r-7f3a-1-2"
    assert parse_label("mvp-r-7f3a-1-2", "mvp") == ParsedLabel("mvp", "r-7f3a", 1, 2, "")
    assert parse_label("mvp-41-0-1", "mvp") == ParsedLabel("mvp", "41", 0, 1, "")


@pytest.mark.parametrize(
    "label",
    [
        f"mvp-{TAG}-r-1a2b-0-1",
        "mvp-r-1a2b-0-1",
        "mvp-123456-41-0-1",  # a digit tag and a numeric run
        "mvp-123456-0-1",  # a numeric old-shape run
        "mvp-2024-01-15",
        "mvp-r-prod-0-0",
        f"mvp-{TAG}-r-a-1-1",
    ],
)
def test_a_label_has_one_reading(label: str) -> None:
    """Every split of the label into the two shapes: exactly one (or none) parses."""
    rest = label.removeprefix("mvp-")
    tagged = re.fullmatch(r"([a-z0-9]{6,16})-(r-[0-9a-z]{1,32}|[0-9]{1,20})-([0-9]+)-([0-9]+)",
                          rest, re.ASCII)
    old = re.fullmatch(r"(r-[0-9a-z]{1,32}|[0-9]{1,20})-([0-9]+)-([0-9]+)", rest, re.ASCII)
    assert not (tagged and old), label


@pytest.mark.parametrize(
    "label",
    [
        "mvp-r-1a2b3c4d-0-\u0661",  # Arabic-Indic one: `\d` took it
        f"mvp-{TAG}-r-1a2b3c4d-\u0660-1",
        f"mvp-{TAG}-\u0664\u0661-0-1",
        "mvp-\uff14\uff11-0-1",  # full-width 41
        f"mvp-{TAG.upper()}-r-1-0-1",
        f"mvp-{TAG}-r-1-0-1\n",
    ],
)
def test_only_ascii_digits_parse(label: str) -> None:
    assert parse_label(label, "mvp") is None


def test_run_r1_never_matches_run_r10() -> None:
    label_r10 = attempt_label("mvp", TAG, "r-10", 1, 1)
    assert label_r10.startswith(f"mvp-{TAG}-r-1")  # the trap a bare startswith falls into
    assert not belongs_to_run(label_r10, "mvp", TAG, "r-1")
    assert belongs_to_run(label_r10, "mvp", TAG, "r-10")
    assert not belongs_to_run(attempt_label("mvp", TAG, "r-1", 1, 1), "mvp", TAG, "r-10")
    assert not label_r10.startswith(run_prefix("mvp", TAG, "r-1"))


def test_a_run_id_is_read_within_the_tag() -> None:
    """`41` here is not another install's `41`, nor an untagged `41`."""
    ours = attempt_label("mvp", TAG, "41", 0, 1)
    assert belongs_to_run(ours, "mvp", TAG, "41")
    assert not belongs_to_run(attempt_label("mvp", "ffffeeee00", "41", 0, 1), "mvp", TAG, "41")
    assert not belongs_to_run("mvp-41-0-1", "mvp", TAG, "41")
    assert belongs_to_run("mvp-41-0-1", "mvp", "", "41")  # a record from before tags


def test_matching_is_scoped_by_prefix_and_node() -> None:
    label = attempt_label("mvp", TAG, "r-ab", 2, 1)
    assert belongs_to_run(label, "mvp", TAG, "r-ab", 2)
    assert not belongs_to_run(label, "mvp", TAG, "r-ab", 1)
    assert not belongs_to_run(label, "other", TAG, "r-ab")
    assert not belongs_to_run(f"{label}-extra", "mvp", TAG, "r-ab")
    assert not belongs_to_run(None, "mvp", TAG, "r-ab")
    assert not belongs_to_run("", "mvp", TAG, "r-ab")
    assert node_prefix("mvp", TAG, "r-ab", 2) == f"mvp-{TAG}-r-ab-2-"


@pytest.mark.parametrize("prefix", ["", "a-b", "MVP", "x" * 25, "-x"])
def test_a_bad_prefix_is_refused_with_the_fix(prefix: str) -> None:
    with pytest.raises(ValueError, match="label_prefix"):
        attempt_label(prefix, TAG, "r-1", 1, 1)


@pytest.mark.parametrize("run_id", ["1a", "R-1", "r_1", "", "-1"])
def test_a_bad_run_id_is_refused(run_id: str) -> None:
    # A plain number is a valid run id (the seed's, see tests/seed); these are not.
    with pytest.raises(ValueError, match="run id"):
        attempt_label("mvp", TAG, run_id, 1, 1)


@pytest.mark.parametrize("tag", ["abc", "A1B2C3", "a-b-c-d", "x" * 17, "\u0661" * 6])
def test_a_bad_tag_is_refused(tag: str) -> None:
    with pytest.raises(ValueError, match="owner_tag"):
        attempt_label("mvp", tag, "r-1", 1, 1)


def test_the_install_tag_is_made_once_kept_0600_and_never_replaced(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert kept_tag(state) is None
    tag = install_tag(state)
    assert re.fullmatch(r"[0-9a-f]{10}", tag)
    path = state / TAG_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert install_tag(state) == tag == kept_tag(state)
    assert [p.name for p in state.iterdir()] == [TAG_FILE]  # no temporary file left
    assert install_tag(state, "mymachines1") == "mymachines1"  # [lease] owner_tag wins
    assert kept_tag(state) == tag  # and the kept one is untouched
    assert install_tag(tmp_path / "other") != tag


def test_an_altered_tag_file_is_refused_not_replaced(tmp_path: Path) -> None:
    (tmp_path / TAG_FILE).write_text("Not A Tag\n")
    with pytest.raises(ValueError, match="owner_tag"):
        install_tag(tmp_path)
    assert (tmp_path / TAG_FILE).read_text() == "Not A Tag\n"
