"""The gate: the engine's public port, a proxy that admits only the run's key."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

from mvp_tui.node.settings import ENGINE_HOST

# ---------------------------------------------------------------------------------------
# The gate: the engine's public port. An HTTP proxy in front of the engine that admits only
# requests carrying the run's key and counts each use for the idle stop; the engine itself
# listens on a private loopback port.

GATE_HOSTS = ("127.0.0.1", "localhost", "::1")  # a Host header naming anything else is a
# DNS-rebinding page reaching the forwarded port: refused
WEBUI_LOGIN_PATH = "/mvp/webui"  # POST key=… here: a cookie for the engine's web UI, then /
WEBUI_COOKIE = "mvp_webui"
GATE_COPY_CHUNK = 65536
GATE_ENGINE_TIMEOUT_S = 600.0  # a model may think this long before its first token
_HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate",
                          "proxy-authorization", "te", "trailers", "transfer-encoding",
                          "upgrade", "content-length", "host"})

GATE_POLL_S = 0.05  # how soon a closing gate's serving loop notices


def webui_token(key: str) -> str:
    """The web UI's cookie value: derived from the key (a cookie store never holds the key)."""
    import hashlib
    import hmac

    return hmac.new(key.encode(), b"mvp-webui", hashlib.sha256).hexdigest()


def _loopback_host(header: str) -> bool:
    host = header.strip().lower()
    if host.startswith("["):
        if "]" not in host:
            return False
        host = host[1 : host.find("]")]
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host in GATE_HOSTS


class Gate:
    """The engine's public port: admits a request only with `Authorization: Bearer <key>`
    (or the web UI's cookie, from a loopback page), only for a loopback Host, and tells
    `on_use` of every POST it passes on (a completion, a chat, an embedding: what the idle
    stop counts). No key (`key` empty): it admits every request, and still counts."""

    def __init__(
        self,
        host: str,
        port: int,
        engine_port: int,
        key: str,
        *,
        engine_key: str = "",
        on_use: Callable[[], None] | None = None,
    ) -> None:
        self.host, self.port, self.engine_port = host, port, engine_port
        self.key, self.engine_key = key, engine_key
        self.on_use = on_use
        self.uses = 0
        self._server: Any = None

    def admits(self, headers: Any) -> bool:
        import hmac

        if not self.key:
            return True
        auth = str(headers.get("Authorization") or "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(
            auth[7:].strip().encode(), self.key.encode()
        ):
            return True
        origin = str(headers.get("Origin") or "")
        if origin and not origin.lower().startswith(("http://127.0.0.1:", "http://localhost:")):
            return False  # a cookie rides only on the UI's own requests
        token = webui_token(self.key)
        for part in str(headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == WEBUI_COOKIE and hmac.compare_digest(value.encode(), token.encode()):
                return True
        return False

    def start(self) -> int:
        """Bind and serve on a thread; the bound port."""
        from http.server import ThreadingHTTPServer

        server = ThreadingHTTPServer((self.host, self.port), _gate_handler())
        server.daemon_threads = True
        server.gate = self  # type: ignore[attr-defined]
        self._server = server
        self.port = server.server_address[1]
        # `shutdown()` waits for the loop's next poll: the default 0.5 s was half a second
        # on every stop (bench/bench_local_ready.py), 50 ms costs nothing that shows.
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": GATE_POLL_S},
                         name="gate", daemon=True).start()
        return self.port

    def used(self) -> None:
        self.uses += 1
        if self.on_use is not None:
            self.on_use()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _gate_handler() -> Any:
    """The gate's request handler class (http.server loads only when a gate opens)."""
    import http.client
    from http.server import BaseHTTPRequestHandler

    class GateHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # A stream is many small writes: Nagle's algorithm would hold each behind the
            # client's delayed ACK.
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # nothing of a request is logged: its headers hold the key

        def _refuse(self, status: int, message: str) -> None:
            body = json.dumps({"error": {"code": status, "message": message,
                                         "type": "authentication_error"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="mvp-tui"')
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> bytes | None:
            if self.headers.get("Transfer-Encoding"):
                return None
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _login(self, gate: Gate) -> None:
            import hmac

            body = self._body() or b""
            fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            key = (fields.get("key") or [""])[0]
            if not gate.key or not hmac.compare_digest(key.encode(), gate.key.encode()):
                self._refuse(401, "wrong key for the web UI")
                return
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", f"{WEBUI_COOKIE}={webui_token(gate.key)}; "
                             "HttpOnly; SameSite=Lax; Path=/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _handle(self) -> None:
            gate: Gate = self.server.gate  # type: ignore[attr-defined]
            if not _loopback_host(str(self.headers.get("Host") or "")):
                self._refuse(403, "this endpoint answers only to 127.0.0.1 or localhost")
                return
            if self.command == "POST" and self.path.split("?", 1)[0] == WEBUI_LOGIN_PATH:
                self._login(gate)
                return
            if not gate.admits(self.headers):
                self._refuse(401, "missing or wrong API key (Authorization: Bearer <key>; "
                             "`mvp-tui endpoint` prints it)")
                self.close_connection = self.headers.get("Content-Length") not in (None, "0")
                return
            body = self._body()
            if body is None:
                self._refuse(411, "send a Content-Length, not a chunked body")
                self.close_connection = True
                return
            if self.command == "POST":
                gate.used()
            self._forward(gate, body)

        def _forward(self, gate: Gate, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP_HEADERS and k.lower() not in
                       ("authorization", "cookie")}
            headers["Host"] = f"{ENGINE_HOST}:{gate.engine_port}"
            headers["Connection"] = "close"  # its body then ends with the connection
            if gate.engine_key:
                headers["Authorization"] = f"Bearer {gate.engine_key}"
            conn = http.client.HTTPConnection(
                ENGINE_HOST, gate.engine_port, timeout=GATE_ENGINE_TIMEOUT_S
            )
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
            except OSError:
                conn.close()
                self._refuse(502, "the engine does not answer")
                return
            try:
                self._relay(answer)
            except OSError:
                self.close_connection = True  # the client went away mid-stream
            finally:
                conn.close()

        def _relay(self, answer: Any) -> None:
            """The engine's answer, streamed on as it comes (an SSE stream chunk by chunk)."""
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_HEADERS:
                    self.send_header(name, value)
            length = answer.getheader("Content-Length")
            bodiless = self.command == "HEAD" or answer.status in (204, 304)
            if length is not None or bodiless:
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                while not bodiless:
                    data = answer.read(GATE_COPY_CHUNK)
                    if not data:
                        break
                    self.wfile.write(data)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if answer.chunked:
                # Passed on as the engine framed it, byte for byte, until it closes (asked
                # to): no parsing per chunk on the way.
                while data := answer.fp.read1(GATE_COPY_CHUNK):
                    self.wfile.write(data)
                return
            while data := answer.read1(GATE_COPY_CHUNK):  # to its end: framed here
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_PATCH = _handle

    return GateHandler


