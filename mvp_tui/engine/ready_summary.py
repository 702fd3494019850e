"""The line said once the node serves: how long each stage of the winning attempt took and
what the run had spent before the first token could come (failed hosts included).

    ready in 2:41 (image 1:05 · ssh 0:10 · agent 0:02 · model 1:20 · load 0:16) · $0.012
    spent before the first token
"""

from __future__ import annotations

from collections.abc import Mapping

from mvp_tui.engine.ready_estimate import clock_text

# The attempt's stages (engine/failures.py `Stage`) as the user knows the physical work:
# the create answer to a running instance is the provider's boot and image pull.
STAGE_WORDS = (
    (("create", "running"), "image"),
    (("ssh",), "ssh"),
    (("agent",), "agent"),
    (("model",), "model"),
    (("engine",), "load"),
)


def stage_parts(stage_secs: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """(word, seconds) per stage the attempt went through, in order."""
    parts = []
    for stages, word in STAGE_WORDS:
        if any(s in stage_secs for s in stages):
            parts.append((word, sum(stage_secs.get(s, 0.0) for s in stages)))
    return tuple(parts)


def summary_text(
    total_s: float,
    parts: tuple[tuple[str, float], ...],
    spent_usd: float,
    overlapped: frozenset[str] = frozenset(),
) -> str:
    """`overlapped`: the stages that ran during earlier ones (the model fetched at boot)."""
    inner = " · ".join(
        f"{word} {clock_text(secs)}" + (", overlapped" if word in overlapped else "")
        for word, secs in parts
    )
    stages = f" ({inner})" if inner else ""
    return (f"ready in {clock_text(total_s)}{stages} · ${spent_usd:.3f} spent before the "
            "first token")
