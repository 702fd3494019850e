"""Every key binding of the dashboard, by id. `[ui.keys]` remaps any of them by its id.

Kept free of Textual so the config loader can validate `[ui.keys]` without importing the UI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KeyBinding:
    id: str
    keys: str  # Textual key names, comma-separated
    action: str
    description: str
    show: bool = True  # in the footer


APP_BINDINGS: tuple[KeyBinding, ...] = (
    KeyBinding("help", "question_mark", "help", "help"),
    KeyBinding("filter", "slash", "filter", "filter"),
    KeyBinding("palette", "colon,ctrl+p", "command_palette", "palette"),
    KeyBinding("next-pane", "tab", "focus_next_pane", "next pane", show=False),
    KeyBinding("previous-pane", "shift+tab", "focus_previous_pane", "previous pane", show=False),
    KeyBinding("search-offers", "r", "search_offers", "offers"),
    KeyBinding("zoom", "z", "toggle_zoom", "zoom"),
    KeyBinding("teardown", "ctrl+d", "teardown", "teardown"),
    KeyBinding("toggle-theme", "ctrl+t", "toggle_theme", "theme", show=False),
    KeyBinding("models", "m", "open_models", "choose the model (hub search, quants, fit)",
               show=False),
    KeyBinding("copy-endpoint", "y", "copy_endpoint", "copy endpoint", show=False),
    KeyBinding("web-ui", "w", "open_web_ui", "web UI", show=False),
    KeyBinding("quit", "q", "quit_app", "quit"),
    KeyBinding("interrupt", "ctrl+c", "quit_app", "quit", show=False),
    # A replay's only (`mvp-tui replay FILE`; the dashboard screen's, tui/dashboard_screen.py);
    # hidden otherwise.
    KeyBinding("replay-pause", "p", "replay('pause')", "replay: pause/resume"),
    KeyBinding("replay-back", "comma", "replay('seek', -1)", "replay: back 10%"),
    KeyBinding("replay-forward", "full_stop", "replay('seek', 1)", "replay: forward 10%"),
    KeyBinding("replay-faster", "plus", "replay('speed', 2.0)", "replay: faster"),
    KeyBinding("replay-slower", "minus", "replay('speed', 0.5)", "replay: slower"),
)

# Bindings of the panes and modals (widgets/), remappable by id like the app's own. This
# list is the widgets' own binding ids (kept free of Textual for the config loader);
# `mvp_tui.tui.bindings.widget_bindings()` derives them from the widget classes, and a test
# holds the two equal, so a binding added to a widget is remappable at once.
WIDGET_BINDING_IDS: frozenset[str] = frozenset({
    "offers-sort", "offers-sort-reverse", "offers-pick", "offers-clear-filter", "filter-clear",
    "offers-cursor-up", "offers-cursor-down", "offers-page-up", "offers-page-down",
    "offers-first", "offers-last", "offers-detail", "lease", "channels-open", "channel-log-back",
    "channel-log-follow", "channel-log-copy", "prompt-cancel", "prompt-leave",
    "prompt-new", "prompt-save", "prompt-copy",
    "prompt-history-older", "prompt-history-newer",
    "bootstrap-detail", "leases-detail", "detail-copy", "help-close", "dialog-cancel",
    "dialog-left", "dialog-right", "dialog-scroll-up", "dialog-scroll-down", "dialog-page-up",
    "dialog-page-down", "picker-back", "picker-save", "picker-search", "picker-results",
})

BINDING_IDS: frozenset[str] = frozenset(b.id for b in APP_BINDINGS) | WIDGET_BINDING_IDS
