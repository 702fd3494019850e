"""The dashboard's endpoint keys: copy the run's OpenAI base URL and key (the clipboard, by
OSC 52), and open the engine's own web UI through the same local port, logged in, in the
browser — only ever on loopback.

The browser gets no key, on its command line (which every local user could read in `ps`) or
anywhere else: it opens a small page in the run's directory (mode 600, removed a few seconds
later) that posts a one-time login code to the node's gate on the web UI's own name,
`<label>.localhost` (browsers resolve it to loopback themselves). The gate spends the code
and answers with a cookie for that name alone, which no other loopback port ever receives.
The UI's pages are the rented host's code: on their own site they reach no cookie of any
other local service.
"""

from __future__ import annotations

import contextlib
import html
import time
import webbrowser
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.endpoint_record import EndpointRecord
from mvp_tui.node_protocol import WEBUI_LOGIN_PATH, webui_host, webui_login_code

WEBUI_PAGE = "webui.html"
WEBUI_PAGE_KEPT_S = 30.0  # long enough for a browser to start and read it; then removed
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


def web_ui_url(endpoint: EndpointRecord, run_dir: Path, now: float | None = None) -> str:
    """The URL to open: the login page (written now, mode 600, holding a one-time code) for
    a keyed endpoint, the web UI itself for one without a key. ValueError unless the
    endpoint is on loopback."""
    if not on_loopback(endpoint.base_url):
        raise ValueError(f"the endpoint {endpoint.base_url!r} is not on loopback")
    if endpoint.auth != "key":
        return f"{endpoint.base_url}/"
    origin = f"http://{webui_host(endpoint.api_key)}:{endpoint.port}"
    code = webui_login_code(endpoint.api_key, time.time() if now is None else now)
    action = html.escape(origin + WEBUI_LOGIN_PATH, quote=True)
    page = (
        "<!doctype html><meta charset=utf-8><title>mvp-tui: the engine's web UI</title>"
        '<meta name="referrer" content="no-referrer">'
        f'<form method="post" action="{action}">'
        f'<input type="hidden" name="code" value="{html.escape(code, quote=True)}">'
        "<noscript><button>open the web UI</button></noscript></form>"
        "<script>document.forms[0].submit()</script>\n"
    )
    path = login_page(run_dir)
    write_atomic(path, page.encode("utf-8"))  # mode 600: its code logs a browser in once
    return path.resolve().as_uri()


def login_page(run_dir: Path) -> Path:
    return run_dir / WEBUI_PAGE


def remove_login_page(run_dir: Path) -> None:
    """The page has done its work (its code is spent, or expires): gone from the disk."""
    with contextlib.suppress(OSError):
        login_page(run_dir).unlink(missing_ok=True)
