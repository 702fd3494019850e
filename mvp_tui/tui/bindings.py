"""Every key of the dashboard, by id: the app's (`mvp_tui.keymap.APP_BINDINGS`) and those
the panes, tables and dialogs declare in their own `BINDINGS`, derived from the classes, so
the help screen lists them all and `[ui.keys]` can remap any of them."""

from __future__ import annotations

import importlib
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode

from mvp_tui import widgets
from mvp_tui.keymap import APP_BINDINGS, KeyBinding


def _widget_classes() -> list[type[DOMNode]]:
    for info in pkgutil.iter_modules(widgets.__path__):
        importlib.import_module(f"{widgets.__name__}.{info.name}")
    seen: list[type[DOMNode]] = []
    stack: list[type[DOMNode]] = [DOMNode]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith(f"{widgets.__name__}."):
                seen.append(sub)
    return sorted(seen, key=lambda c: (c.__module__, c.__qualname__))


def widget_bindings() -> list[KeyBinding]:
    """Each binding the widgets declare (their own `BINDINGS`, not inherited ones), once
    per id; the app's ids (shared by a pane that binds the same key) are left out."""
    app_ids = {b.id for b in APP_BINDINGS}
    out: dict[str, KeyBinding] = {}
    for cls in _widget_classes():
        for item in cls.__dict__.get("BINDINGS", []):
            if not isinstance(item, Binding) or item.id is None:
                continue
            if item.id in app_ids or item.id in out:
                continue
            out[item.id] = KeyBinding(item.id, item.key, item.action, item.description,
                                      item.show)
    return list(out.values())


def unnamed_bindings() -> list[str]:
    """`Class: key` of every widget binding without an id (it could not be remapped)."""
    return [
        f"{cls.__qualname__}: {item.key}"
        for cls in _widget_classes()
        for item in cls.__dict__.get("BINDINGS", [])
        if isinstance(item, Binding) and item.id is None
    ]


def all_bindings() -> list[KeyBinding]:
    return [*APP_BINDINGS, *widget_bindings()]
