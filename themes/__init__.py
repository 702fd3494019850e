"""The dashboard's Textual themes, with the app's own semantic colour variables.

Widgets never name a colour: the .tcss uses `$ok`, `$warn`, `$fail`, `$spend`, `$lease-live`,
`$lease-failed`, `$attempt-pending` and `$price-cheap`, which every theme here defines.
"""

from __future__ import annotations

from pathlib import Path

from textual.theme import Theme

APP_CSS_PATH = Path(__file__).with_name("app.tcss")

DARK_VARIABLES = {
    "ok": "#98c379",
    "warn": "#e5c07b",
    "fail": "#e06c75",
    "spend": "#d19a66",
    "lease-live": "#98c379",
    "lease-failed": "#e06c75",
    "attempt-pending": "#61afef",
    "price-cheap": "#56b6c2",
    "pane-title": "#abb2bf",
}

LIGHT_VARIABLES = {
    "ok": "#2e7d32",
    "warn": "#9a6700",
    "fail": "#c62828",
    "spend": "#8d4e00",
    "lease-live": "#2e7d32",
    "lease-failed": "#c62828",
    "attempt-pending": "#1565c0",
    "price-cheap": "#00796b",
    "pane-title": "#37474f",
}

MVP_DARK = Theme(
    name="mvp-dark",
    primary="#61afef",
    secondary="#c678dd",
    accent="#56b6c2",
    warning=DARK_VARIABLES["warn"],
    error=DARK_VARIABLES["fail"],
    success=DARK_VARIABLES["ok"],
    foreground="#d7dae0",
    background="#1b1f27",
    surface="#21252b",
    panel="#2c313a",
    dark=True,
    variables=DARK_VARIABLES,
)

MVP_LIGHT = Theme(
    name="mvp-light",
    primary="#1565c0",
    secondary="#6a1b9a",
    accent="#00796b",
    warning=LIGHT_VARIABLES["warn"],
    error=LIGHT_VARIABLES["fail"],
    success=LIGHT_VARIABLES["ok"],
    foreground="#1f2328",
    background="#f6f8fa",
    surface="#ffffff",
    panel="#e6eaef",
    dark=False,
    variables=LIGHT_VARIABLES,
)

THEMES: tuple[Theme, ...] = (MVP_DARK, MVP_LIGHT)
DEFAULT_THEME = MVP_DARK.name
