"""Prompt text made safe for the screen, and the pane's one-line summary of an answer.

Answers are the engine's text, untrusted: escapes and control characters go, newlines and tabs
stay. Render the result with `rich.text.Text(...)` or Markdown streaming, never as markup.
"""

from __future__ import annotations

from mvp_tui.prompt.events import PromptDone
from mvp_tui.untrusted import clean_lines

MAX_LINE_CHARS = 4096


def safe_answer(text: str) -> str:
    """Answer text for display: each line cleaned of escapes and controls, newlines kept."""
    return clean_lines(text, MAX_LINE_CHARS)


def summary(done: PromptDone) -> str:
    """`64 tok · 112 tok/s · TTFT 180 ms · $0.0002`: what the pane shows under an answer."""
    parts = [f"{done.tokens_generated} tok", f"{done.tokens_per_s:,.0f} tok/s"]
    if done.ttft_ms is not None:
        parts.append(f"TTFT {done.ttft_ms} ms")
    parts.append(f"{done.elapsed_ms / 1000:.2f} s")
    if done.cost_usd is not None:
        parts.append(f"${done.cost_usd:.4f}")
    return " · ".join(parts)
