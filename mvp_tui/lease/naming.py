"""Run ids and instance labels for the lease walk: a fresh run id here; the label grammar
(`attempt_label`, `parse_label`, …) is the base module mvp_tui/labels.py's, re-exported for the
walk and its callers (a provider reads labels too, and must not import from lease/).
"""

from __future__ import annotations

import secrets

from mvp_tui.labels import ParsedLabel as ParsedLabel
from mvp_tui.labels import attempt_label as attempt_label
from mvp_tui.labels import belongs_to_run as belongs_to_run
from mvp_tui.labels import check_prefix as check_prefix
from mvp_tui.labels import node_prefix as node_prefix
from mvp_tui.labels import parse_label as parse_label
from mvp_tui.labels import run_prefix as run_prefix
from mvp_tui.run_ids import check_run_id as check_run_id  # re-exported for the walk


def new_run_id() -> str:
    """A fresh run id, unique per run: `r-` and 8 random hex digits."""
    return "r-" + secrets.token_hex(4)
