"""What every fake provider API shares: one reply's shape, and the request handler that reads a
request, hands it to its fake and writes the reply (keep-alive HTTP/1.1 on loopback).

The rehearsal's Vast.ai server (shipped) and the tests' RunPod server both build on it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

JSON = "application/json"


@dataclass
class Reply:
    """One answer: status, body (JSON-able, text, bytes, or None for no body), headers."""

    status: int
    body: Any
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


class FakeApi(Protocol):
    def _handle(self, handler: ApiHandler, method: str) -> None: ...


class ApiHandler(BaseHTTPRequestHandler):
    """Reads one request, hands it to the fake (`server_fake`), writes its reply."""

    server_fake: FakeApi
    protocol_version = "HTTP/1.1"
    timeout = 30  # idle keep-alive connections die after this
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms stall

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read the fake's own request log instead

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def reply(self, reply: Reply) -> None:
        if reply.body is None:
            data = b""
        elif isinstance(reply.body, str):
            data = reply.body.encode()
        elif isinstance(reply.body, bytes):
            data = reply.body
        else:
            data = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            if data:
                self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def drop(self) -> None:
        """Close the connection without a byte of answer."""
        self.close_connection = True

    def do_GET(self) -> None:
        self.server_fake._handle(self, "GET")

    def do_POST(self) -> None:
        self.server_fake._handle(self, "POST")

    def do_PUT(self) -> None:
        self.server_fake._handle(self, "PUT")

    def do_DELETE(self) -> None:
        self.server_fake._handle(self, "DELETE")

    def do_PATCH(self) -> None:
        self.server_fake._handle(self, "PATCH")
