"""Run ids and instance labels: the only way the lease walk recognises its own instances.

A label is `{prefix}-{run}-{node}-{attempt}`, unique per create attempt, so reconciliation can
tell attempts apart. Matching is exact (a regular expression over the whole label), never a
bare `startswith`: run `r-1` must never claim the instances of run `r-10`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from mvp_tui.run_ids import RUN_ID_PATTERN
from mvp_tui.run_ids import check_run_id as check_run_id  # re-exported for the walk

_PREFIX = re.compile(r"[a-z0-9][a-z0-9_]{0,23}")


@dataclass(frozen=True, slots=True)
class ParsedLabel:
    """The parts of one of our labels."""

    prefix: str
    run_id: str
    node_id: int
    attempt: int


def new_run_id() -> str:
    """A fresh run id, unique per run: `r-` and 8 random hex digits."""
    return "r-" + secrets.token_hex(4)


def check_prefix(prefix: str) -> str:
    """`prefix` when it is a usable label prefix, else ValueError naming the fix."""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"label_prefix {prefix!r} is not usable: use 1-24 lowercase letters, digits or '_', "
            "starting with a letter or digit (no '-', which separates the label's parts)"
        )
    return prefix


def attempt_label(prefix: str, run_id: str, node_id: int, attempt: int) -> str:
    """The label of one create attempt."""
    return f"{check_prefix(prefix)}-{check_run_id(run_id)}-{node_id}-{attempt}"


def run_prefix(prefix: str, run_id: str) -> str:
    """What every label of the run starts with (for provider listings; match with `parse`)."""
    return f"{check_prefix(prefix)}-{check_run_id(run_id)}-"


def node_prefix(prefix: str, run_id: str, node_id: int) -> str:
    """What every label of one node of the run starts with."""
    return f"{run_prefix(prefix, run_id)}{node_id}-"


def parse_label(label: str | None, prefix: str) -> ParsedLabel | None:
    """The parts of `label` when it is one of ours under `prefix`, else None."""
    if not label:
        return None
    match = re.fullmatch(rf"{re.escape(prefix)}-({RUN_ID_PATTERN})-(\d+)-(\d+)", label)
    if match is None:
        return None
    return ParsedLabel(prefix, match[1], int(match[2]), int(match[3]))


def belongs_to_run(label: str | None, prefix: str, run_id: str, node_id: int | None = None) -> bool:
    """Whether `label` is an attempt label of `run_id` (and of `node_id` when given)."""
    parsed = parse_label(label, prefix)
    if parsed is None or parsed.run_id != run_id:
        return False
    return node_id is None or parsed.node_id == node_id
