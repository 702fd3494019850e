"""A loopback stand-in for the Hugging Face hub's `resolve` endpoint, with Range support.

It serves registered files at /<repo>/resolve/<revision>/<file>, records every request
(path and headers), can cut the first response short (the connection drops mid-body), and
can require a bearer token (401 otherwise).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class HubRequest:
    path: str
    headers: dict[str, str]


@dataclass
class HubState:
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[HubRequest] = field(default_factory=list)
    cut_first_at: int | None = None  # bytes of the first full response before the drop
    require_token: str | None = None
    redirects: dict[str, str] = field(default_factory=dict)  # path -> absolute URL (302)
    files_without_auth: set[str] = field(default_factory=set)  # e.g. a signed CDN URL


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        state = self.server.state
        state.requests.append(HubRequest(self.path, dict(self.headers.items())))
        if self.path in state.redirects:
            self.send_response(302)
            self.send_header("Location", state.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if (
            state.require_token
            and self.path not in state.files_without_auth
            and self.headers.get("Authorization") != (f"Bearer {state.require_token}")
        ):
            self._plain(401, b"unauthorized")
            return
        data = state.files.get(self.path)
        if data is None:
            self._plain(404, b"not found")
            return
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        start = int(match.group(1)) if match else 0
        if start >= len(data) and match:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:]
        self.send_response(206 if match else 200)
        if match:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if state.cut_first_at is not None and not match:
            cut, state.cut_first_at = state.cut_first_at, None
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def _plain(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class HubServer:
    """Runs the fake hub in a thread; `url` is its base (what MVP_HF_ENDPOINT takes)."""

    def __init__(self) -> None:
        self.state = HubState()
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def add_file(self, repo: str, revision: str, name: str, data: bytes) -> None:
        self.state.files[f"/{repo}/resolve/{revision}/{name}"] = data

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
