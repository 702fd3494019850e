"""A fresh run id for the lease walk. The label grammar (`attempt_label`, `parse_label`, …) is
the base module mvp_tui/labels.py (a provider reads labels too, and must not import lease/).
"""

from __future__ import annotations

import secrets

from mvp_tui.run_ids import check_run_id as check_run_id  # re-exported for the walk


def new_run_id() -> str:
    """A fresh run id, unique per run: `r-` and 8 random hex digits."""
    return "r-" + secrets.token_hex(4)
