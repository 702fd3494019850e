"""Python's full collections held off while an answer streams.

The cycle collector's oldest generation is walked every so often as objects are made: each
walk visits every object the dashboard holds (45–90 ms on a loaded 2-core box, more as the
transcript grows) and draws nothing meanwhile, so one landing mid-answer stalls its tokens
(bench/bench_dashboard_tokens.py: the last token drawn 2–3x later). While held, the young
generations are still collected (a streamed answer's short-lived cycles go as usual, a few
ms at most); the full walk waits until the answer is drawn, when the collector's own
thresholds decide as they would have. Prompts streamed back to back (the prompt RPC, a
queue) would keep it held for good: a hold older than `HELD_AT_MOST_S` is let go at the
next answer's start, so what survives the young generations is still walked now and then.
"""

from __future__ import annotations

import gc
import time

HELD_THRESHOLD = 1 << 30  # the oldest generation's: never reached while held
HELD_AT_MOST_S = 10.0  # answers back to back: a full walk allowed this often at least

_restore: list[tuple[int, float]] = []  # while held: the threshold to go back to, since when


def hold_full_collections(now: float | None = None) -> None:
    """Until `resume_full_collections`: no automatic full collection (one hold at a time;
    one held `HELD_AT_MOST_S` already is let go instead)."""
    now = time.monotonic() if now is None else now
    if _restore:
        if now - _restore[0][1] > HELD_AT_MOST_S:
            resume_full_collections()
        return
    young, middle, oldest = gc.get_threshold()
    _restore.append((oldest, now))
    gc.set_threshold(young, middle, HELD_THRESHOLD)


def resume_full_collections() -> None:
    """The collector's thresholds as they were; a full collection due runs at its next turn."""
    if not _restore:
        return
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _restore.pop()[0])


def full_collections_held() -> bool:
    return bool(_restore)
