"""A loopback stand-in for the Hugging Face hub's `resolve` endpoint, with Range support.

It serves registered files at /<repo>/resolve/<revision>/<file>, records every request
(path and headers), can cut the first response short (the connection drops mid-body), and
can require a bearer token (401 otherwise). A HEAD answers as the real hub's does
(reference/hf-hub.md): X-Linked-Size, X-Linked-Etag (the sha256, quoted), X-Repo-Commit.
`rate_bps` paces the bodies (a host's link, for the bring-up bench).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class HubRequest:
    path: str
    headers: dict[str, str]


@dataclass
class HubState:
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[HubRequest] = field(default_factory=list)  # the GETs
    heads: list[HubRequest] = field(default_factory=list)  # the metadata HEADs
    cut_first_at: int | None = None  # bytes of the first full response before the drop
    require_token: str | None = None
    redirects: dict[str, str] = field(default_factory=dict)  # path -> absolute URL (302)
    files_without_auth: set[str] = field(default_factory=set)  # e.g. a signed CDN URL
    head_sha256: dict[str, str] = field(default_factory=dict)  # path -> a digest HEAD claims
    rate_bps: float | None = None  # pace every body at this many bytes a second
    commit: str = "c0ffee" * 6 + "0123"
    first_body_at: float | None = None  # time.monotonic() when a body first began


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_HEAD(self) -> None:
        state = self.server.state
        state.heads.append(HubRequest(self.path, dict(self.headers.items())))
        data = state.files.get(self.path)
        target = state.redirects.get(self.path)
        if target is not None:  # the hub's headers on its redirect, as the real one does
            data = state.files.get(urlsplit(target).path)
        if self._refused() or (data is None and target is None):
            self._plain(401 if self._refused() else 404, b"")
            return
        self.send_response(302 if target is not None else 200)
        if target is not None:
            self.send_header("Location", target)
        if data is not None:
            self.send_header("X-Linked-Size", str(len(data)))
            digest = state.head_sha256.get(self.path) or hashlib.sha256(data).hexdigest()
            self.send_header("X-Linked-Etag", f'"{digest}"')
            self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Repo-Commit", state.commit)
        self.end_headers()

    def _refused(self) -> bool:
        state = self.server.state
        return bool(
            state.require_token
            and self.path not in state.files_without_auth
            and self.headers.get("Authorization") != f"Bearer {state.require_token}"
        )

    def do_GET(self) -> None:
        state = self.server.state
        state.requests.append(HubRequest(self.path, dict(self.headers.items())))
        if self.path in state.redirects:
            self.send_response(302)
            self.send_header("Location", state.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self._refused():
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
        if state.first_body_at is None:
            state.first_body_at = time.monotonic()
        if state.rate_bps is None:
            self.wfile.write(body)
            return
        self._paced(body, state.rate_bps)

    def _paced(self, body: bytes, rate_bps: float) -> None:
        """The body at `rate_bps`: the link's speed, a scripted stand-in for physical work."""
        started, sent, step = time.monotonic(), 0, max(1, int(rate_bps / 20))
        try:
            while sent < len(body):
                self.wfile.write(body[sent : sent + step])
                sent += step
                ahead = sent / rate_bps - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped (a prefetch handed over)

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
