"""Python's full collections held off while an answer streams.

The cycle collector's oldest generation is walked every so often as objects are made: each
walk visits every object the dashboard holds (45–90 ms on a loaded 2-core box, more as the
transcript grows) and draws nothing meanwhile, so one landing mid-answer stalls its tokens
(bench/bench_dashboard_tokens.py: the last token drawn 3x later). While held, the young
generations are still collected (a streamed answer's short-lived cycles go as usual, a few
ms at most); the full walk waits until the answer is drawn, when the collector's own
thresholds decide as they would have.
"""

from __future__ import annotations

import gc

HELD_THRESHOLD = 1 << 30  # the oldest generation's: never reached while held

_restore: list[int] = []  # the oldest generation's threshold to go back to, while held


def hold_full_collections() -> None:
    """Until `resume_full_collections`: no automatic full collection (one hold at a time)."""
    if _restore:
        return
    young, middle, oldest = gc.get_threshold()
    _restore.append(oldest)
    gc.set_threshold(young, middle, HELD_THRESHOLD)


def resume_full_collections() -> None:
    """The collector's thresholds as they were; a full collection due runs at its next turn."""
    if not _restore:
        return
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _restore.pop())


def full_collections_held() -> bool:
    return bool(_restore)
