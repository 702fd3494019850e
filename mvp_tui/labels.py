"""Instance labels, their grammar: the only way the lease walk recognises its own instances.
A base module: the lease walk writes labels (lease/naming.py re-exports these) and a
provider reads them (providers/docker/spec.py), which must not import from lease/.

A label is `{prefix}-{tag}-{run}-{node}-{attempt}`: `tag` is this install's (identity.py), so
a label says which install made it, and a run id is read within it (`41` here is not another
machine's `41`). Labels written before the tag, `{prefix}-{run}-{node}-{attempt}`, still
parse (tag ""): they are ours only where a record here holds them. Each part is ASCII and the
two shapes cannot read as each other (a tag is 6+ characters without `-`, a run id is `r-…`
or digits), so a label has one reading. Matching is exact (a regular expression over the
whole label), never a bare `startswith`: run `r-1` must never claim the instances of `r-10`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mvp_tui.install_tag import TAG_PATTERN, check_owner_tag
from mvp_tui.run_ids import RUN_ID_PATTERN, check_run_id

_PREFIX = re.compile(r"[a-z0-9][a-z0-9_]{0,23}", re.ASCII)
_TAIL = rf"({RUN_ID_PATTERN})-([0-9]{{1,9}})-([0-9]{{1,9}})"
_TAGGED = re.compile(rf"({TAG_PATTERN})-{_TAIL}", re.ASCII)
_OLD = re.compile(_TAIL, re.ASCII)


@dataclass(frozen=True, slots=True)
class ParsedLabel:
    """The parts of a label of mvp-tui's shape (`owner_tag` "" for the shape before tags)."""

    prefix: str
    run_id: str
    node_id: int
    attempt: int
    owner_tag: str = ""


def check_prefix(prefix: str) -> str:
    """`prefix` when it is a usable label prefix, else ValueError naming the fix."""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"label_prefix {prefix!r} is not usable: use 1-24 lowercase letters, digits or '_', "
            "starting with a letter or digit (no '-', which separates the label's parts)"
        )
    return prefix


def _owner(owner_tag: str) -> str:
    """The label's owner part with its separator ("" for a record from before tags)."""
    return f"{check_owner_tag(owner_tag)}-" if owner_tag else ""


def attempt_label(prefix: str, owner_tag: str, run_id: str, node_id: int, attempt: int) -> str:
    """The label of one create attempt (`owner_tag` "" only for a run recorded before tags)."""
    return f"{run_prefix(prefix, owner_tag, run_id)}{node_id}-{attempt}"


def run_prefix(prefix: str, owner_tag: str, run_id: str) -> str:
    """What every label of the run starts with (for provider listings; match with `parse`)."""
    return f"{check_prefix(prefix)}-{_owner(owner_tag)}{check_run_id(run_id)}-"


def node_prefix(prefix: str, owner_tag: str, run_id: str, node_id: int) -> str:
    """What every label of one node of the run starts with."""
    return f"{run_prefix(prefix, owner_tag, run_id)}{node_id}-"


def parse_label(label: str | None, prefix: str) -> ParsedLabel | None:
    """The parts of `label` when it has mvp-tui's shape under `prefix` (either shape), else
    None. A parsed label is not proof of anything: whose it is, `ownership.py` decides."""
    if not label or not label.startswith(f"{prefix}-"):
        return None
    rest = label[len(prefix) + 1 :]
    match = _TAGGED.fullmatch(rest)
    if match is not None:
        return ParsedLabel(prefix, match[2], int(match[3]), int(match[4]), match[1])
    match = _OLD.fullmatch(rest)
    if match is not None:
        return ParsedLabel(prefix, match[1], int(match[2]), int(match[3]))
    return None


def belongs_to_run(
    label: str | None,
    prefix: str,
    owner_tag: str,
    run_id: str,
    node_id: int | None = None,
) -> bool:
    """Whether `label` is an attempt label of `run_id` under `owner_tag` (the run's own
    shape: "" for a run recorded before tags), and of `node_id` when given."""
    parsed = parse_label(label, prefix)
    if parsed is None or (parsed.owner_tag, parsed.run_id) != (owner_tag, run_id):
        return False
    return node_id is None or parsed.node_id == node_id
