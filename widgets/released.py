"""Let removed widgets go: Textual keeps some alive after they left the tree.

Two holders, both Textual's (8.x), both emptied whenever the Prompt pane lets widgets go
(each answer's end: the footer's keys, rebuilt as the pane's bindings change with each
prompt, and any other widget removed since):

- `StylesCache.get_inner_outer` is memoised with `functools.lru_cache(1024)` on an instance
  method, so each entry's key holds a widget's `StylesCache`, and with it every strip that
  widget last rendered: up to 1024 dead widgets' lines. The cached value is two `Style`s
  built from two colours: recomputing it costs next to nothing.
- A watcher (`watch(other, name, ...)`, `data_bind`) is kept on the object it watches, in
  `__watchers[name]`, until that attribute next changes (Textual prunes closed watchers
  only then: Textualize/textual#6666). The footer rebuilds its keys whenever the bindings
  change, each key bound to the footer's `compact`, which never changes: every key ever
  shown stayed alive, with its styles and rendered lines (~30 KB a prompt through the
  prompt RPC, issue 40 §4). The same pruning is done here for every node on the screens.
"""

from __future__ import annotations

from textual._styles_cache import StylesCache
from textual.app import App
from textual.dom import DOMNode

WATCHERS = "__watchers"  # where Textual's `reactive._watch` keeps an object's watchers


def release_removed_widgets(app: App[object] | None = None) -> None:
    """Drop what keeps removed widgets alive: the class-wide memo's entries and, with `app`,
    the watchers of closed nodes on the app and every node of its screens."""
    clear = getattr(StylesCache.get_inner_outer, "cache_clear", None)
    if clear is not None:  # a Textual without the memo has nothing to let go
        clear()
    if app is None:
        return
    prune_closed_watchers(app)
    for screen in app.screen_stack:
        for node in screen.walk_children(with_self=True):
            prune_closed_watchers(node)


def prune_closed_watchers(node: DOMNode) -> int:
    """Drop the watchers that closed nodes set on `node`, as Textual does when the watched
    attribute changes; returns how many went."""
    watchers = getattr(node, WATCHERS, None)
    if not isinstance(watchers, dict):
        return 0
    dropped = 0
    for entries in watchers.values():
        if not isinstance(entries, list):
            continue
        kept = [entry for entry in entries if not getattr(entry[0], "_closing", False)]
        dropped += len(entries) - len(kept)
        entries[:] = kept  # in place: the list is Textual's own
    return dropped
