"""Let removed widgets go: Textual keeps some alive in a class-wide cache.

Textual (8.x) memoises `StylesCache.get_inner_outer` with `functools.lru_cache(1024)` on an
instance method, so each entry's key holds a widget's `StylesCache`, and with it every strip
that widget last rendered, long after the widget left the tree: up to 1024 dead widgets' lines.
The Prompt pane removes widgets with every answer (the streamed Markdown's blocks, the turns
that scroll out of the transcript), so a dashboard serving prompts all day grew with them
(issue 40 §4). The cached value is two `Style`s built from two colours: recomputing it costs
next to nothing, so the cache is emptied whenever the pane lets widgets go.
"""

from __future__ import annotations

from textual._styles_cache import StylesCache


def release_removed_widgets() -> None:
    """Drop the class-wide cache entries that keep removed widgets' rendered lines alive."""
    clear = getattr(StylesCache.get_inner_outer, "cache_clear", None)
    if clear is not None:  # a Textual without the memo has nothing to let go
        clear()
