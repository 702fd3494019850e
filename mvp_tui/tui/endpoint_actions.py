"""The dashboard's endpoint keys: copy the run's OpenAI base URL and key (the clipboard, by
OSC 52), and open the engine's own web UI through the same local port, logged in with the
key, in the browser — only ever on loopback.

The browser gets no key on its command line (which every local user could read in `ps`): it
opens a small page in the run's directory (mode 600) that posts the key to the node's gate,
which answers with a cookie for the web UI and sends the browser on to `/`.
"""

from __future__ import annotations

import html
import webbrowser
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.endpoint_record import EndpointRecord

WEBUI_LOGIN_PATH = "/mvp/webui"  # the agent's gate (mvp_tui.node.gate)
WEBUI_PAGE = "webui.html"
LOOPBACK = ("127.0.0.1", "localhost", "::1")

Opener = Callable[[str], object]


def default_opener(url: str) -> object:
    return webbrowser.open(url, new=2)


def clipboard_text(endpoint: EndpointRecord) -> str:
    """Base URL and key as shell assignments (what `mvp-tui endpoint --env` prints)."""
    key = endpoint.api_key if endpoint.auth == "key" else "none"
    return f"OPENAI_BASE_URL={endpoint.openai_base_url}\nOPENAI_API_KEY={key}\n"


def on_loopback(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK


def web_ui_url(endpoint: EndpointRecord, run_dir: Path) -> str:
    """The URL to open: the login page (written now, mode 600) for a keyed endpoint, the
    web UI itself for one without a key. ValueError unless the endpoint is on loopback."""
    if not on_loopback(endpoint.base_url):
        raise ValueError(f"the endpoint {endpoint.base_url!r} is not on loopback")
    if endpoint.auth != "key":
        return f"{endpoint.base_url}/"
    action = html.escape(endpoint.base_url + WEBUI_LOGIN_PATH, quote=True)
    key = html.escape(endpoint.api_key, quote=True)
    page = (
        "<!doctype html><meta charset=utf-8><title>mvp-tui: the engine's web UI</title>"
        '<meta name="referrer" content="no-referrer">'
        f'<form method="post" action="{action}">'
        f'<input type="hidden" name="key" value="{key}">'
        "<noscript><button>open the web UI</button></noscript></form>"
        "<script>document.forms[0].submit()</script>\n"
    )
    path = run_dir / WEBUI_PAGE
    write_atomic(path, page.encode("utf-8"))  # mode 600: the key is in it
    return path.resolve().as_uri()
