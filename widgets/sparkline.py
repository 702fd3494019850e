"""A one-line sparkline of recent values (`▁▃▅█`): tok/s per prompt, $/h over the session."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 12) -> str:
    """The last `width` values as bars scaled between their min and max ("" for none);
    equal values read as a flat middle line."""
    recent = [max(0.0, v) for v in values[-width:]]
    if not recent:
        return ""
    low, high = min(recent), max(recent)
    if high == low:
        return BARS[len(BARS) // 2 - 1] * len(recent)
    scale = (len(BARS) - 1) / (high - low)
    return "".join(BARS[round((v - low) * scale)] for v in recent)
