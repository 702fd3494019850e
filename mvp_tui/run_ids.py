"""The shapes a run id may take, in one place for the config loader and the lease labels.

A run id is the app's own `r-` and lowercase letters or digits (`new_run_id` gives 8 hex
digits), or a seed config's number (`run_id = 41`, `MVP_RUN_ID=41`) kept as its decimal text.
Neither contains a character a label, a file name or a shell env value would trip on.
"""

from __future__ import annotations

import re

RUN_ID_PATTERN = r"r-[0-9a-z]{1,32}|[0-9]{1,20}"
_RUN_ID = re.compile(RUN_ID_PATTERN)


def check_run_id(run_id: str) -> str:
    """`run_id` when it has one of the two shapes, else ValueError."""
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(
            f"run id {run_id!r} is not valid: expected a number (the seed's ids) or 'r-' and "
            "lowercase letters or digits"
        )
    return run_id
